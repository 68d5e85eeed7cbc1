"""Values as Redis replies them, made Python's: text, and times (Unix ms, from Redis's clock)."""

from datetime import UTC, datetime


def decode(b):
    """Text of a reply (bytes decoded as UTF-8, a bad byte replaced); anything else as it is."""
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


_LATEST, _EARLIEST = datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC)


def ms_to_datetime(ms):
    """A time in Unix ms (int, float, bytes or text) as an aware UTC datetime; None for none."""
    if ms in (None, b"", ""):
        return None
    try:
        return datetime.fromtimestamp(int(float(ms)) / 1000, tz=UTC)
    except (OverflowError, ValueError, OSError):  # past what a datetime holds (Redis holds it): its bound
        return _LATEST if float(ms) > 0 else _EARLIEST
