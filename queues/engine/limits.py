"""Limits: a queue's concurrency and rate, and the same per partition (README "Limits").

Options are checked here (the handler's at registration and by the system check, the
operator's in ``Queue.set_limits``); the scripts keep the counts (``lua/includes/limits.lua``).
"""

import math
from dataclasses import dataclass

from .errors import ConfigurationError
from .numbers import is_finite, shown

#: "100/m" style rates: the window of each unit, in seconds.
RATE_UNITS = {"s": 1, "m": 60, "h": 3600}
#: The longest rate window (a day): the log of starts is kept that long.
RATE_WINDOW_MAX = 86400
#: The most starts one rate may allow per window (the log holds one entry per start).
RATE_STARTS_MAX = 1_000_000
CONCURRENCY_MAX = 1_000_000

#: A rate of N starts per window W lets at most N handlers start in any W of the handlers' own
#: clock, though a handler starts a little after Redis counted its start (the reply travels, a
#: thread or the event loop picks it up): a worker runs a handler of a rate-limited queue only
#: within the rate's start grace G of asking for it (else gives it back unstarted, its start not
#: counted), and Redis counts starts over W + G. G is a tenth of W, from 2 ms to 1 s: the price
#: is a rate of N per W + G by Redis's clock (a tenth less at most).
START_GRACE_FRACTION = 0.1
START_GRACE_MIN, START_GRACE_MAX = 0.002, 1.0


def start_grace_ms(window_ms):
    """The start grace (ms) of a rate whose window is ``window_ms`` (as the scripts compute it)."""
    grace = math.ceil(window_ms * START_GRACE_FRACTION)
    return min(int(START_GRACE_MAX * 1000), max(int(START_GRACE_MIN * 1000), grace))


class StartedLate(Exception):
    """A handler of a rate-limited queue that could not start within the rate's start grace of
    its worker asking for it: it is not run, and its task goes back first in line."""


@dataclass(frozen=True)
class Rate:
    """At most ``starts`` starts in any window of ``seconds``."""

    starts: int
    seconds: float

    @property
    def window_ms(self):
        return int(round(self.seconds * 1000))

    def as_dict(self):
        return {"starts": self.starts, "seconds": self.seconds}


def _fail(queue, option, message):
    raise ConfigurationError(f"handler {queue!r}: {option} {message}")


def check_concurrency(queue, option, value):
    """``value`` if it is an integer from 1 up, else ConfigurationError naming queue and option."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= CONCURRENCY_MAX:
        _fail(queue, option, f"must be an integer from 1 to {CONCURRENCY_MAX}, not {shown(value)}")
    return value


def parse_rate(queue, option, value):
    """A Rate from ``(starts, seconds)`` or ``"100/m"``, ``"10/s"``, ``"500/h"``; ConfigurationError
    naming the queue and option when malformed."""
    if isinstance(value, Rate):
        starts, seconds = value.starts, value.seconds
    elif isinstance(value, str):
        count, sep, unit = value.strip().partition("/")
        count = count.strip()
        if not sep or unit.strip() not in RATE_UNITS or not (count.isascii() and count.isdigit()):  # not "²/m"
            _fail(queue, option, f'must be (starts, seconds) or like "100/m", "10/s", "500/h", not {value!r}')
        if len(count) > len(str(RATE_STARTS_MAX)):  # before int(): past 4,300 digits it raises
            _fail(queue, option, f"must allow an integer number of starts from 1 to {RATE_STARTS_MAX}")
        starts, seconds = int(count), RATE_UNITS[unit.strip()]
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        starts, seconds = value
    else:
        _fail(queue, option, f'must be (starts, seconds) or like "100/m", "10/s", "500/h", not {value!r}')
    if isinstance(starts, bool) or not isinstance(starts, int) or not 1 <= starts <= RATE_STARTS_MAX:
        _fail(queue, option, f"must allow an integer number of starts from 1 to {RATE_STARTS_MAX}, not {shown(starts)}")
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not is_finite(seconds)
        or not 0.001 <= seconds <= RATE_WINDOW_MAX
    ):
        _fail(
            queue, option, f"window must be a number of seconds from 0.001 to {RATE_WINDOW_MAX}, not {shown(seconds)}"
        )
    return Rate(starts, seconds)


@dataclass(frozen=True)
class Limits:
    """A handler's limits; ``partition`` is a function of the task giving its key."""

    concurrency: int | None = None
    rate: Rate | None = None
    partition: object = None
    partition_concurrency: int | None = None
    partition_rate: Rate | None = None

    def script_args(self):
        """The six values the scripts take: concurrency, rate starts and window ms, and the same
        per partition; '' for none."""
        out = []
        for c, r in ((self.concurrency, self.rate), (self.partition_concurrency, self.partition_rate)):
            out += ["" if c is None else str(c)]
            out += ["", ""] if r is None else [str(r.starts), str(r.window_ms)]
        return tuple(out)


def check_limits(queue, concurrency=None, rate=None, partition=None, partition_concurrency=None, partition_rate=None):
    """The checked Limits of a handler's options; ConfigurationError naming the queue and option."""
    if concurrency is not None:
        check_concurrency(queue, "concurrency", concurrency)
    if rate is not None:
        rate = parse_rate(queue, "rate", rate)
    if partition is not None and not callable(partition):
        _fail(queue, "partition", f"must be a function of the task returning its key, not {partition!r}")
    if partition_concurrency is not None:
        check_concurrency(queue, "partition_concurrency", partition_concurrency)
    if partition_rate is not None:
        partition_rate = parse_rate(queue, "partition_rate", partition_rate)
    if partition is None:
        for name, value in (("partition_concurrency", partition_concurrency), ("partition_rate", partition_rate)):
            if value is not None:
                _fail(queue, name, "needs partition= (a function of the task giving its partition key)")
    return Limits(concurrency, rate, partition, partition_concurrency, partition_rate)


NO_LIMITS = Limits()


def override_args(queue, given):
    """The six values ``set_limits`` takes (as ``Limits.script_args``, '-' for "no limit", '' for
    "leave as is") of the overrides ``given`` ({option: value or None}); ConfigurationError naming
    the queue and option for a bad value."""
    args = [""] * 6
    for name, at in (("concurrency", 0), ("partition_concurrency", 3)):
        if name in given:
            value = given[name]
            args[at] = "-" if value is None else str(check_concurrency(queue, name, value))
    for name, at in (("rate", 1), ("partition_rate", 4)):
        if name in given:
            if given[name] is None:
                args[at], args[at + 1] = "-", "-"
            else:
                r = parse_rate(queue, name, given[name])
                args[at], args[at + 1] = str(r.starts), str(r.window_ms)
    return args
