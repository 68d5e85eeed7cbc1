"""Task controls given at enqueue: ``expires``, ``throttle`` and ``debounce``, checked here.

Each is decided by the enqueue script (``lua/enqueue-24.lua``) and the take (``expiry.lua``,
``controls.lua``), atomically; this module turns the options into the script's text arguments,
or raises ``InvalidTask`` naming the option before anything is written.

- ``expires``: seconds from now (a number > 0) or an aware datetime: a task not started by then
  never starts; it ends ``expired`` (``counts()["expired"]``, ``Queue.expired()``), no retry.
- ``throttle=(key, seconds)``: the first enqueue with the key opens a window of that many
  seconds and adds its task; every enqueue with the key inside it writes nothing and returns
  the first one's id.
- ``debounce=(key, seconds)``: the task runs ``seconds`` after the last enqueue with the key,
  with the last payload: an enqueue while the key's task has not started replaces its payload
  and due time and returns its id; once it has started, a new task is made.
"""

from datetime import datetime

from . import text
from .errors import InvalidTask
from .keys import LOCK_KEY_MAX
from .numbers import is_finite, shown

#: The longest window or expiry accepted (seconds): 30 days.
LONGEST = 30 * 86400

#: What ``check`` returns when no control is given (the script's three arguments).
NONE = ("", "", "")


def _seconds(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not is_finite(value):
        raise InvalidTask(f"{name} must be a number of seconds, not {shown(value)}")
    if not 0 < value <= LONGEST:
        raise InvalidTask(f"{name} must be more than 0 and at most {LONGEST} seconds (30 days), not {shown(value)}")
    return max(1, round(value * 1000))


def _window(name, value):
    """``'<ms>\\n<key>'`` for a (key, seconds) pair."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidTask(f'{name} must be a pair ("<key>", seconds), not {value!r}')
    key, seconds = value
    if not isinstance(key, str) or not key or len(key) > LOCK_KEY_MAX:
        raise InvalidTask(f"{name}'s key must be a non-empty string of at most {LOCK_KEY_MAX} characters, not {key!r}")
    return f"{_seconds(name + ' seconds', seconds)}\n{text.checked(name + ' key', key)}"


def expires_arg(expires):
    """The script's text for ``expires``: ``'+<ms>'`` (seconds from now, by Redis's clock) or
    ``'@<ms>'`` (an aware datetime, Unix ms)."""
    if isinstance(expires, datetime):
        if expires.tzinfo is None or expires.utcoffset() is None:
            raise InvalidTask(f"expires must be an aware datetime (with a time zone), not {expires!r}")
        return f"@{int(expires.timestamp() * 1000)}"
    return f"+{_seconds('expires', expires)}"


def check(count, *, expires=None, throttle=None, debounce=None, delay=None, eta=None):
    """The script's (expires, throttle, debounce) arguments for an enqueue of ``count`` payloads
    with these options, or InvalidTask naming what is wrong (nothing is written)."""
    if expires is None and throttle is None and debounce is None:
        return NONE
    if throttle is not None and debounce is not None:
        raise InvalidTask("give throttle or debounce, not both")
    if (throttle is not None or debounce is not None) and count != 1:
        raise InvalidTask(f"throttle and debounce take one payload per enqueue, not {count}")
    if debounce is not None and (delay is not None or eta is not None):
        raise InvalidTask("debounce sets the due time itself: give it without delay or eta")
    # An expiry is counted from the enqueue, a delay or a debounce's quiet period included: one
    # shorter than those makes a task that expires when it comes due (allowed: it says so).
    ex = "" if expires is None else expires_arg(expires)
    th = "" if throttle is None else _window("throttle", throttle)
    db = "" if debounce is None else _window("debounce", debounce)
    return ex, th, db
