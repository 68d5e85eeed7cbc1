"""How long the record of ended tasks is kept: ``WORQR["RETENTION"]`` (``history.py`` prunes it).

``RETENTION`` (each key optional)::

    {"completed": "24h", "cancelled": "24h", "failed": "7d", "max_per_queue": 100_000,
     "queues": {"reports": {"completed": "7d"}}}

Durations are seconds (a number) or a string: ``90s``, ``15m``, ``24h``, ``7d``. A queue's own
settings take the others' values for the keys they leave out.
"""

import re
from dataclasses import dataclass, field, fields, replace

from . import keys
from .errors import ConfigurationError
from .numbers import is_finite

#: The longest retention (a year) and the most records per queue.
RETENTION_MAX_S = 366 * 86400
MAX_PER_QUEUE_MAX = 10_000_000

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value, what):
    """Seconds from a number or a string like ``90s``, ``15m``, ``24h``, ``7d``; raises
    ConfigurationError naming ``what``."""
    if isinstance(value, str):
        m = _DURATION_RE.fullmatch(value.strip())
        if not m:
            raise ConfigurationError(
                f"{what} must be seconds or a duration like '90s', '15m', '24h', '7d', not {value!r}"
            )
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) if is_finite(value) else float("inf")  # an int past a float's range too
    else:
        raise ConfigurationError(f"{what} must be seconds or a duration like '24h', not {value!r}")
    if not 0 <= seconds <= RETENTION_MAX_S:
        raise ConfigurationError(f"{what} must be between 0 and 366 days, not {value!r}")
    return seconds


@dataclass(frozen=True)
class Retention:
    """How long ended tasks' records are kept (seconds, by outcome) and how many per queue at
    most; ``queues`` holds the queues' own (queue name, Retention) overrides."""

    completed: float = 86400.0
    cancelled: float = 86400.0
    failed: float = 7 * 86400.0
    max_per_queue: int = 100_000
    queues: tuple = field(default=(), compare=True)

    def for_queue(self, queue):
        for name, own in self.queues:
            if name == queue:
                return own
        return self

    @classmethod
    def parse(cls, raw, base=None, what="WORQR['RETENTION']", nested=True):
        """A Retention from a ``RETENTION`` dict (``base``: what unset keys take); raises
        ConfigurationError for a bad key or value."""
        if not isinstance(raw, dict):
            raise ConfigurationError(f"{what} must be a dict, not {raw!r}")
        base = base or cls()
        allowed = {"completed", "cancelled", "failed", "max_per_queue"} | ({"queues"} if nested else set())
        unknown = sorted(str(k) for k in set(raw) - allowed)
        if unknown:
            raise ConfigurationError(
                f"{what}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(allowed))})"
            )
        changes = {
            k: parse_duration(raw[k], f"{what}[{k!r}]") for k in ("completed", "cancelled", "failed") if k in raw
        }
        if "max_per_queue" in raw:
            n = raw["max_per_queue"]
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_PER_QUEUE_MAX:
                raise ConfigurationError(f"{what}['max_per_queue'] must be an integer from 0 to {MAX_PER_QUEUE_MAX}")
            changes["max_per_queue"] = n
        out = replace(base, **changes)
        if nested and "queues" in raw:
            per = raw["queues"]
            if not isinstance(per, dict):
                raise ConfigurationError(f"{what}['queues'] must be a dict of queue name -> settings")
            own = []
            for name, settings in sorted(per.items()):
                try:
                    keys.check_queue_name(name)
                except ValueError as exc:
                    raise ConfigurationError(f"{what}['queues']: {exc}") from None
                own.append((name, cls.parse(settings, replace(out, queues=()), f"{what}['queues'][{name!r}]", False)))
            out = replace(out, queues=tuple(own))
        return out

    def as_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "queues"}
