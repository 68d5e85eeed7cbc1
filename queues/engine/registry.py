"""Handlers: which function runs the tasks of which queue, with its defaults."""

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from . import keys
from .controls import LONGEST
from .errors import ConfigurationError
from .limits import NO_LIMITS, Limits, check_limits
from .numbers import MAX_RETRIES, MAX_SECONDS, is_finite, shown

#: A handler: a function of the task, sync or ``async def``; ``handler`` returns it unchanged.
F = TypeVar("F", bound=Callable[..., Any])
#: A rate: (starts, window in seconds), or "100/m", "10/s", "500/h".
Rate = tuple[int, float] | str

#: Where a sync handler runs: on one of the worker's threads, or in a pre-forked process of its own.
ISOLATIONS = ("thread", "process")
#: The largest chunk a chunk handler may take: one ``start`` call looks at most at this many
#: entries of a queue's lists (``take.lua``'s TAKE_SCAN_MAX).
MAX_CHUNK = 1000
#: A generator handler's ``checkpoint_every`` when not given (seconds).
DEFAULT_CHECKPOINT_EVERY = 1.0


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
    expires: float | None = None  # seconds: a task not started by then never starts (controls)
    #: A generator handler's checkpoints: at most one write per this many seconds (None: not a
    #: generator function, no checkpoints; ``worker/checkpoints.py``).
    checkpoint_every: float | None = None

    @property
    def checkpointed(self):
        """Whether it is a generator handler (sync or async) whose yields are checkpoints."""
        return self.checkpoint_every is not None


_handlers: dict[str, HandlerSpec] = {}


def _not_finite(value):
    """Not an int or float, or one that is NaN or infinite (a bool is not a number here)."""
    return isinstance(value, bool) or not isinstance(value, (int, float)) or not is_finite(value)


def handler(
    queue: str,
    *,
    retries: int | None = None,
    timeout: float | None = None,
    backoff: float | None = None,
    lock: str | Callable[..., str | None] | None = None,
    keep_result: bool = False,
    isolation: Literal["thread", "process"] | None = None,
    concurrency: int | None = None,
    rate: Rate | None = None,
    partition: Callable[..., str | None] | None = None,
    partition_concurrency: int | None = None,
    partition_rate: Rate | None = None,
    chunk: int | None = None,
    chunk_wait: float | None = None,
    expires: float | None = None,
    checkpoint_every: float | None = None,
) -> Callable[[F], F]:
    """Register the decorated function (sync or ``async def``) as the handler of ``queue``.

    Limits, for every worker together: ``concurrency`` (active tasks at once), ``rate`` (starts in
    any window: ``(100, 60)`` or ``"100/m"``, ``"10/s"``, ``"500/h"``); ``partition`` (a function of
    the task giving its key, run at enqueue) with ``partition_concurrency`` / ``partition_rate``
    per key. ``chunk=n``: the handler takes ``tasks: list[Task]``, up to ``n`` tasks at once, waiting
    at most ``chunk_wait`` seconds (default 1) to fill a chunk (``ChunkFailed`` fails some of them).
    ``expires`` (seconds) is the default of ``enqueue(..., expires=)``: a task not started that
    long after its enqueue never starts (it ends ``expired``). A generator function (or async
    generator) yields checkpoints, saved at most once per ``checkpoint_every`` seconds (default 1).
    A bad option raises ConfigurationError naming the queue and the option."""
    keys.check_queue_name(queue)
    chunk_wait = check_chunk(queue, chunk, chunk_wait)
    limits = check_limits(queue, concurrency, rate, partition, partition_concurrency, partition_rate)
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES
    ):
        raise ConfigurationError(
            f"handler {queue!r}: retries must be an integer from 0 to {MAX_RETRIES:,}, not {shown(retries)}"
        )
    # finite, as enqueue's own (a NaN passes every comparison; an infinite timeout is none at all)
    if timeout is not None and (_not_finite(timeout) or not 0 < timeout <= MAX_SECONDS):
        raise ConfigurationError(
            f"handler {queue!r}: timeout must be a finite number > 0, at most {MAX_SECONDS:,} s, not {shown(timeout)}"
        )
    if backoff is not None and (_not_finite(backoff) or not 0 <= backoff <= MAX_SECONDS):
        raise ConfigurationError(
            f"handler {queue!r}: backoff must be a finite number >= 0, at most {MAX_SECONDS:,} s, not {shown(backoff)}"
        )
    if lock is not None and not callable(lock) and not _is_lock_key(lock):
        raise ConfigurationError(
            f"handler {queue!r}: lock must be a function or a key (text of 1 to {keys.LOCK_KEY_MAX} characters)"
        )
    if expires is not None and (
        isinstance(expires, bool) or not isinstance(expires, (int, float)) or not 0 < expires <= LONGEST
    ):
        raise ConfigurationError(f"handler {queue!r}: expires must be a number of seconds > 0 and <= {LONGEST}")
    if isolation is not None and isolation not in ISOLATIONS:
        raise ConfigurationError(f'handler {queue!r}: isolation must be "thread" or "process", not {isolation!r}')

    every = DEFAULT_CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every
    if isinstance(every, bool) or not isinstance(every, (int, float)) or not 0 <= every <= LONGEST:
        raise ConfigurationError(
            f"handler {queue!r}: checkpoint_every must be a number of seconds >= 0 and <= {LONGEST} (30 days)"
        )

    def register(func):
        # A plain function is looked at through the decorators that keep what they decorate as
        # ``__wrapped__`` (functools.wraps): one that passes a generator function's call on is a
        # generator handler; an ``async def`` (or generator) wrapper is what it is itself.
        kind = func if _is_special(func) else _unwrap(func)
        is_async_generator = inspect.isasyncgenfunction(kind)
        is_generator = is_async_generator or inspect.isgeneratorfunction(kind)
        is_async = inspect.iscoroutinefunction(kind) or is_async_generator
        if checkpoint_every is not None and not is_generator:
            raise ConfigurationError(
                f"handler {queue!r}: checkpoint_every is for a generator handler (one that yields checkpoints)"
            )
        if is_generator and chunk is not None:
            raise ConfigurationError(
                f"handler {queue!r}: a chunk handler can't be a generator (checkpoints are per task)"
            )
        if is_generator and isolation == "process":
            raise ConfigurationError(
                f'handler {queue!r}: a generator handler (checkpoints) runs on a thread or the event loop, not with isolation="process"'
            )
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
            expires=expires,
            checkpoint_every=float(every) if is_generator else None,
        )
        return func

    return register


def _is_lock_key(lock):
    """Whether ``lock`` is a key every enqueue would take (``keys.check_lock_key``, UTF-8 text)."""
    if not isinstance(lock, str) or not 0 < len(lock) <= keys.LOCK_KEY_MAX:
        return False
    try:
        lock.encode()
    except UnicodeEncodeError:
        return False
    return True


def _is_special(func):
    """Whether ``func`` is itself a generator, async generator or coroutine function."""
    return inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func) or inspect.iscoroutinefunction(func)


def _unwrap(func):
    """``func`` under its ``functools.wraps`` decorators (itself if it has none, or a loop)."""
    try:
        return inspect.unwrap(func)
    except ValueError:  # a cycle of __wrapped__
        return func


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
    one always runs on the event loop, a generator one on a thread)."""
    if default not in ISOLATIONS:
        raise ConfigurationError(f'isolation must be "thread" or "process", not {default!r}')
    if spec.is_async or spec.checkpointed:
        return replace(spec, isolation="thread")
    return replace(spec, isolation=spec.isolation or default)


def get_handler(queue):
    return _handlers.get(queue)


def all_handlers():
    return dict(_handlers)
