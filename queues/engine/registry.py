"""Handlers: which function runs the tasks of which queue, with its defaults."""

import inspect
from dataclasses import dataclass

from . import keys
from .errors import ConfigurationError

_handlers = {}


@dataclass(frozen=True)
class HandlerSpec:
    queue: str
    func: object
    is_async: bool
    retries: int | None = None
    timeout: float | None = None
    backoff: float | None = None
    lock: object = None  # a lock key, or a function of the task returning one
    keep_result: bool = False


def handler(queue, *, retries=None, timeout=None, backoff=None, lock=None, keep_result=False):
    """Register the decorated function (sync or ``async def``) as the handler of ``queue``."""
    keys.check_queue_name(queue)
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or retries < 0):
        raise ConfigurationError(f"handler {queue!r}: retries must be an integer >= 0")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigurationError(f"handler {queue!r}: timeout must be a number > 0")
    if backoff is not None and (isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or backoff < 0):
        raise ConfigurationError(f"handler {queue!r}: backoff must be a number >= 0")
    if lock is not None and not (callable(lock) or isinstance(lock, str)):
        raise ConfigurationError(f"handler {queue!r}: lock must be a string or a function")

    def register(func):
        existing = _handlers.get(queue)
        if existing is not None and _qualname(existing.func) != _qualname(func):
            raise ConfigurationError(
                f"queue {queue!r} already has a handler ({_qualname(existing.func)})"
            )
        _handlers[queue] = HandlerSpec(
            queue, func, inspect.iscoroutinefunction(func), retries, timeout, backoff, lock,
            keep_result,
        )
        return func

    return register


def _qualname(func):
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def get_handler(queue):
    return _handlers.get(queue)


def all_handlers():
    return dict(_handlers)

