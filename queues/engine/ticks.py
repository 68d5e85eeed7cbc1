"""When a schedule's ticks fall: pure functions of the schedule's timing and a time, no Redis.

A timing is ``cron`` (5 fields, or ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``,
``@yearly``; read by ``cronsim``) in an IANA ``timezone``, or ``every`` N seconds. Times are Unix
milliseconds, as Redis's clock gives them.

- ``every``: the ticks are the multiples of the interval since the Unix epoch, so every worker
  computes the same ticks without agreeing on a start (``every: 60`` ticks at each full minute).
- ``cron``: wall-clock times in the timezone, DST-correct the way Debian's cron is: a time that
  does not exist on a spring-forward day (02:30 in Europe/Paris on the last Sunday of March) runs
  once, at the first valid time after it (03:00); a time that happens twice on a fall-back day
  runs once, the first time. Expressions whose minute or hour is a wildcard or a step
  (``*/15 * * * *``, ``0 * * * *``) follow real time instead: every 15 real minutes.
"""

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

#: The ``@`` shorthands and the 5-field expressions they stand for.
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: Ticks looked at per call at most (a cron time that exists only in a DST gap is skipped through).
_MAX_STEPS = 1000


class TimingError(ValueError):
    """A cron expression, interval or timezone that can't be used; the message says why."""


@dataclass(frozen=True)
class Timing:
    """``cron`` (as given) or ``every`` (seconds), and the timezone of cron's wall-clock times."""

    cron: str | None = None
    every: float | None = None
    timezone: str = "UTC"

    @property
    def expression(self):
        """The 5-field cron expression (aliases expanded), or None for ``every``."""
        if self.cron is None:
            return None
        return ALIASES.get(self.cron.strip().lower(), self.cron.strip())

    @property
    def period_ms(self):
        return max(1, round(self.every * 1000))


#: The longest cron expression or timezone name accepted (what the HTTP API's schema says too).
TEXT_MAX = 1000


def _shown(value, limit=100):
    """``repr(value)``, cut to about ``limit`` characters (an error message stays short)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def zone(name):
    """The tzinfo of an IANA name ('UTC' is UTC); TimingError if unknown."""
    if name == "UTC":
        return UTC
    if not isinstance(name, str) or not name or name.startswith(("/", ".")) or ".." in name or len(name) > TEXT_MAX:
        raise TimingError(f"unknown timezone {_shown(name)} (an IANA name such as 'Europe/Paris')")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise TimingError(f"unknown timezone {_shown(name)} (an IANA name such as 'Europe/Paris')") from None


def check_cron(expression):
    """Raise TimingError unless ``expression`` is 5 cron fields or an ``@`` shorthand."""
    if not isinstance(expression, str) or not expression.strip():
        raise TimingError("cron must be a non-empty string such as '0 3 * * *'")
    if len(expression) > TEXT_MAX:
        raise TimingError(f"cron must be at most {TEXT_MAX:,} characters, not {len(expression):,}")
    text = ALIASES.get(expression.strip().lower(), expression.strip())
    if text.startswith("@"):
        raise TimingError(f"unknown shorthand {expression!r} (use {', '.join(sorted(ALIASES))})")
    if len(text.split()) != 5:
        raise TimingError(f"cron {expression!r} must have 5 fields (minute hour day month weekday)")
    try:
        CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError, IndexError) as exc:
        raise TimingError(f"invalid cron {expression!r}: {exc}") from None


def next_after(timing, after_ms):
    """The first tick strictly after ``after_ms`` (Unix ms), in Unix ms."""
    if timing.every is not None:
        period = timing.period_ms
        return (int(after_ms) // period + 1) * period
    start = datetime.fromtimestamp(int(after_ms) / 1000, zone(timing.timezone))
    ticks = CronSim(timing.expression, start)
    for _ in range(_MAX_STEPS):
        try:
            tick = next(ticks)
        except StopIteration:
            raise TimingError(f"cron {timing.cron!r} has no time in the next 50 years") from None
        ms = int(tick.timestamp() * 1000)
        if ms > after_ms:  # a start inside a repeated hour can give a tick behind it
            return ms
    raise TimingError(f"cron {timing.cron!r}: no tick found after {after_ms}")


def check(timing, now_ms):
    """Raise TimingError if ``timing`` can't give its next tick after ``now_ms``."""
    if timing.cron is not None:
        check_cron(timing.cron)
    zone(timing.timezone)
    next_after(timing, now_ms)
