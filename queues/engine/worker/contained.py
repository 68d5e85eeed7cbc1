"""What a handler raises that would otherwise escape its task.

- asyncio's futures refuse a StopIteration (``set_exception`` raises TypeError), so a thread's
  or a chunk's StopIteration would leave its task's future unset: its task never ended and its
  slot stayed taken. It travels in a ``Raised`` instead.
- asyncio's tasks re-raise a SystemExit or KeyboardInterrupt out of the event loop, so an
  ``async def`` handler's ``sys.exit()`` ended the worker (its tasks then ran again elsewhere,
  ending that worker too). ``contained`` makes it its task's failed attempt, as it is on a thread
  or in a handler process. (The worker's own Ctrl-C and SIGTERM are signal handlers on its loop:
  they never raise inside a handler.)

A sync handler that returns a coroutine (a decorator hid an ``async def``) did none of its work:
that fails its attempt (``returned_coroutine``), on a thread or in a handler process.

The processor reports the exception the handler raised (``raised``), its traceback included,
and ``describe`` gives its text even when its ``str()`` raises (a kept result's too).
"""

import inspect

from .. import text

#: The error of an attempt whose sync handler returned a coroutine (which then never ran).
RETURNED_COROUTINE = (
    "the handler returned a coroutine, which never ran: a handler that awaits must be an "
    "`async def` function (a decorator that wraps one must keep it async)"
)

#: The start of the error of an attempt whose return value (keep_result) could not be kept.
RESULT_NOT_KEPT = "the handler's return value could not be kept: "
#: ... because it has no text.
RESULT_UNKEPT = RESULT_NOT_KEPT + "str() of it raised "


def _text(value):
    try:
        return str(value)
    except Exception:
        return "<str() of it raised>"


def describe(exc):
    """'Type: message' of an exception (its type alone with no message), at most 2,000 characters."""
    text = _text(exc)
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:2000]


def result_value(value):
    """A kept return value as str or bytes (``str()`` of anything else), or a TypeError when
    that raises. (A handler process sends this to the worker, which makes it ``result_text``.)"""
    if isinstance(value, (str, bytes)):
        return value
    try:
        return str(value)
    except Exception as exc:
        raise TypeError(RESULT_UNKEPT + describe(exc)) from exc


def result_text(value, limit=None):
    """A kept return value as the bytes Redis keeps (bytes as they are; text, or else ``str()``
    of it, encoded as a payload is), or an error saying why it can't be kept: a TypeError when
    its ``str()`` raises, a ValueError when it is not valid text or is over ``limit`` bytes
    (``MAX_RESULT_BYTES``; None: no bound). A text far over the bound is refused unencoded."""
    value = result_value(value)
    if isinstance(value, str):
        if limit is not None and len(value) > limit:  # at least a byte a character
            raise ValueError(
                f"{RESULT_NOT_KEPT}it is {len(value):,} characters, over WORQR['MAX_RESULT_BYTES'] ({limit:,} bytes)"
            )
        try:
            value = text.exact(value)
        except ValueError as exc:
            raise ValueError(RESULT_NOT_KEPT + str(exc)) from None
    if limit is not None and len(value) > limit:
        raise ValueError(f"{RESULT_NOT_KEPT}it is {len(value):,} bytes, over WORQR['MAX_RESULT_BYTES'] ({limit:,})")
    return value


class Raised(Exception):
    """Carries to the loop an exception that must not be raised or set there as it is."""

    def __init__(self, exc):
        super().__init__(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        self.exc = exc


def returned_coroutine(value):
    """A TypeError if a sync handler returned a coroutine (closed, so that it never runs and
    Python warns of nothing), else None: the work it stands for was not done."""
    if inspect.iscoroutine(value):
        value.close()
        return TypeError(RETURNED_COROUTINE)
    return None


def settable(exc):
    """``exc``, or a ``Raised`` carrying it if a future can't hold it."""
    return Raised(exc) if isinstance(exc, StopIteration) else exc


def raised(exc):
    """What the handler raised: ``exc``, unless it carries it."""
    return exc.exc if isinstance(exc, Raised) else exc


async def contained(coro):
    """Await an ``async def`` handler's coroutine; its SystemExit or KeyboardInterrupt fails its
    task instead of stopping the worker's loop."""
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as exc:
        raise Raised(exc) from exc
