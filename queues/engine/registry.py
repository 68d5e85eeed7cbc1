"""Handlers: which function runs the tasks of which queue, with its defaults."""

import importlib
import inspect
from dataclasses import dataclass, replace

from . import keys
from .errors import ConfigurationError
from .limits import NO_LIMITS, Limits, check_limits

_handlers = {}

#: Where a sync handler runs: on one of the worker's threads, or in a pre-forked process of its own.
ISOLATIONS = ("thread", "process")
#: The largest chunk a chunk handler may take: one ``start`` call looks at most at this many
#: entries of a queue's lists (``take.lua``'s TAKE_SCAN_MAX).
MAX_CHUNK = 1000


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
    isolation: str | None = None  # "thread" or "process"; None: the worker's default (--isolation)
    limits: Limits = NO_LIMITS  # concurrency, rate, partition (README "Limits")
    chunk: int | None = None  # a chunk handler: up to this many tasks per call (a list)
    chunk_wait: float = 1.0  # seconds a chunk waits to fill before its handler runs anyway


def handler(
    queue,
    *,
    retries=None,
    timeout=None,
    backoff=None,
    lock=None,
    keep_result=False,
    isolation=None,
    concurrency=None,
    rate=None,
    partition=None,
    partition_concurrency=None,
    partition_rate=None,
    chunk=None,
    chunk_wait=None,
):
    """Register the decorated function (sync or ``async def``) as the handler of ``queue``.

    Limits, for every worker together: ``concurrency`` (active tasks at once), ``rate`` (starts in
    any window: ``(100, 60)`` or ``"100/m"``, ``"10/s"``, ``"500/h"``); ``partition`` (a function of
    the task giving its key, run at enqueue) with ``partition_concurrency`` / ``partition_rate``
    per key. ``chunk=n``: the handler takes ``tasks: list[Task]``, up to ``n`` tasks at once, waiting
    at most ``chunk_wait`` seconds (default 1) to fill a chunk (``ChunkFailed`` fails some of them).
    A bad option raises ConfigurationError naming the queue and the option."""
    keys.check_queue_name(queue)
    chunk_wait = check_chunk(queue, chunk, chunk_wait)
    limits = check_limits(queue, concurrency, rate, partition, partition_concurrency, partition_rate)
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or retries < 0):
        raise ConfigurationError(f"handler {queue!r}: retries must be an integer >= 0")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigurationError(f"handler {queue!r}: timeout must be a number > 0")
    if backoff is not None and (isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or backoff < 0):
        raise ConfigurationError(f"handler {queue!r}: backoff must be a number >= 0")
    if lock is not None and not (callable(lock) or isinstance(lock, str)):
        raise ConfigurationError(f"handler {queue!r}: lock must be a string or a function")
    if isolation is not None and isolation not in ISOLATIONS:
        raise ConfigurationError(f'handler {queue!r}: isolation must be "thread" or "process", not {isolation!r}')

    def register(func):
        is_async = inspect.iscoroutinefunction(func)
        if isolation == "process":
            if is_async:
                raise ConfigurationError(
                    f'handler {queue!r}: isolation="process" is for sync handlers; '
                    f"an async handler runs on the worker's event loop"
                )
            _check_module_level(queue, func)
        existing = _handlers.get(queue)
        if existing is not None and _qualname(existing.func) != _qualname(func):
            raise ConfigurationError(f"queue {queue!r} already has a handler ({_qualname(existing.func)})")
        _handlers[queue] = HandlerSpec(
            queue,
            func,
            is_async,
            retries,
            timeout,
            backoff,
            lock,
            keep_result,
            isolation,
            limits,
            chunk,
            chunk_wait,
        )
        return func

    return register


def _qualname(func):
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def _check_module_level(queue, func):
    """An isolated handler must be a module-level function: a lambda or a closure can't be found
    again by its module path (the name its process knows it by)."""
    qualname = getattr(func, "__qualname__", None)
    if not callable(func) or not isinstance(qualname, str) or "<" in qualname:
        raise ConfigurationError(
            f'handler {queue!r}: {_qualname(func)} runs with isolation="process", so it must be a '
            f"function defined at module level, importable by its module path (not a lambda or a closure)"
        )


def check_importable(spec):
    """Raise ConfigurationError unless ``spec.func`` is what its module path names (checked when
    a worker starts, once every module is imported)."""
    _check_module_level(spec.queue, spec.func)
    try:
        found = importlib.import_module(spec.func.__module__)
        for part in spec.func.__qualname__.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError, TypeError):
        found = None
    if found is not spec.func:
        raise ConfigurationError(
            f'handler {spec.queue!r}: {_qualname(spec.func)} runs with isolation="process", but that '
            f"module path does not name it: define it at module level under its own name"
        )


def check_chunk(queue, chunk, chunk_wait):
    """Check a handler's ``chunk`` and ``chunk_wait``; returns ``chunk_wait`` with its default."""
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or not 1 <= chunk <= MAX_CHUNK):
        raise ConfigurationError(f"handler {queue!r}: chunk must be an integer from 1 to {MAX_CHUNK}")
    if chunk_wait is None:
        return 1.0
    if chunk is None:
        raise ConfigurationError(f"handler {queue!r}: chunk_wait needs chunk")
    if isinstance(chunk_wait, bool) or not isinstance(chunk_wait, (int, float)) or not 0 <= chunk_wait <= 3600:
        raise ConfigurationError(f"handler {queue!r}: chunk_wait must be a number of seconds from 0 to 3600")
    return float(chunk_wait)


def with_isolation(spec, default):
    """``spec`` with its isolation decided: its own, else ``default`` for a sync handler (an async
    one always runs on the event loop)."""
    if default not in ISOLATIONS:
        raise ConfigurationError(f'isolation must be "thread" or "process", not {default!r}')
    if spec.is_async:
        return replace(spec, isolation="thread")
    return replace(spec, isolation=spec.isolation or default)


def get_handler(queue):
    return _handlers.get(queue)


def all_handlers():
    return dict(_handlers)
