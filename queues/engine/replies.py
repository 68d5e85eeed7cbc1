"""Values as Redis replies them, made Python's: text, and times (Unix ms, from Redis's clock)."""

from datetime import UTC, datetime


def decode(b):
    """Text of a reply (bytes decoded as UTF-8, a bad byte replaced); anything else as it is."""
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def ms_to_datetime(ms):
    """A time in Unix ms (int, float, bytes or text) as an aware UTC datetime; None for none."""
    if ms in (None, b"", ""):
        return None
    return datetime.fromtimestamp(int(float(ms)) / 1000, tz=UTC)
