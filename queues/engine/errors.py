"""worqr's exceptions. Every error the engine raises derives from WorqrError::

WorqrError
├── ConfigurationError        a bad setting
│   └── InvalidSchedule       a bad entry of SCHEDULES (names the schedule and the field)
├── InvalidInput (ValueError) bad input from a caller; nothing was written
│   ├── InvalidQueueName
│   ├── InvalidWorkerName
│   ├── InvalidTask           bad payload or option (size, delay, retries, timeout, lock...)
│   ├── PayloadTooLarge
│   └── InvalidCheckpoint     a generator handler yielded a value that is not JSON or over 64 KB
├── TaskNotFound (LookupError)
├── ScheduleNotFound (LookupError)
├── InvalidState              the task exists but is not in a state that allows the action
│   └── NotFinished           only finished tasks were to be deleted, and it has not run yet
├── StaleLease                a finish/stop/fail with a lease that is no longer the task's
├── WorkerLost                the worker's registration is gone (it was presumed dead)
├── WorkerNameTaken           a live worker already runs under that name
├── NotReplicated             a write not on MIN_REPLICAS_ACK replicas in time (it may be lost)
├── NoHandler                 a worker was asked to serve a queue with no handler
├── TooManyQueues             an enqueue would make a queue beyond MAX_QUEUES: nothing added
├── WorkerCrashed             an isolated handler's process died by itself (a failed attempt)
├── RetryLater                raised by a handler: run again later, no attempt used
├── ChunkFailed               raised by a chunk handler: these tasks of the chunk failed, the rest completed
└── RedisUnavailable          Redis unreachable for ENQUEUE_RETRY_FOR: which ids were added, may have been, were not
"""

import math

from .numbers import MAX_SECONDS, is_finite, shown


class WorqrError(Exception):
    """Base class of every worqr error."""


class ConfigurationError(WorqrError):
    pass


class InvalidSchedule(ConfigurationError):
    """A bad schedule: ``schedule`` is its name, ``field`` the key at fault (or None)."""

    def __init__(self, schedule, field, message):
        where = f"schedule {schedule!r}" + (f", {field!r}" if field else "")
        super().__init__(f"{where}: {message}")
        self.schedule, self.field, self.reason = schedule, field, message


class InvalidInput(WorqrError, ValueError):
    pass


class InvalidQueueName(InvalidInput):
    pass


class InvalidWorkerName(InvalidInput):
    pass


class InvalidTask(InvalidInput):
    pass


class InvalidCheckpoint(InvalidInput):
    """A generator handler yielded a checkpoint that can't be saved (a failed attempt)."""


class PayloadTooLarge(InvalidTask):
    pass


class TaskNotFound(WorqrError, LookupError):
    pass


class ScheduleNotFound(WorqrError, LookupError):
    pass


class InvalidState(WorqrError):
    pass


class NotFinished(InvalidState):
    """A delete of finished tasks only met one that has not run yet: removing it is a cancel."""


class StaleLease(WorqrError):
    pass


class WorkerLost(WorqrError):
    pass


class WorkerNameTaken(WorqrError):
    pass


class NotReplicated(WorqrError):
    """The write was made on the master, but fewer than ``MIN_REPLICAS_ACK`` replicas had it
    within ``REPLICAS_ACK_TIMEOUT``: a failover now could lose it (``wanted``, ``got``)."""

    def __init__(self, message, wanted=0, got=0):
        super().__init__(message)
        self.wanted, self.got = wanted, got


class NoHandler(WorqrError):
    pass


class TooManyQueues(WorqrError):
    """An enqueue into a queue that does not exist, when ``WORQR["MAX_QUEUES"]`` queues exist
    already: nothing was added (``queue``, ``limit``)."""

    def __init__(self, queue, limit):
        super().__init__(
            f"queue {queue!r} does not exist and can't be made: there are {limit} queues already, the most "
            f"WORQR['MAX_QUEUES'] allows (enqueue into an existing queue; a queue left empty, with no worker, is "
            f"forgotten after WORQR['QUEUE_FORGET_AFTER']; Queue.drop() removes one now)"
        )
        self.queue, self.limit = queue, limit


class WorkerCrashed(WorqrError):
    """An isolated handler's process died by itself (a segfault, an OOM kill, ``os._exit``): the
    attempt fails with this error, e.g. "handler process exited with signal 11"."""


class RetryLater(WorqrError):
    """Raised by a handler to be run again after ``seconds`` without using up an attempt
    (for "too many requests" answers)."""

    def __init__(self, seconds, message="retry later"):
        super().__init__(message)
        # Anything float() takes (a Retry-After header's "30", a Decimal); but a NaN, an infinity
        # or 1e300 s had its task's due time unreadable (and, held, its queue stopped for good).
        # A negative wait is no wait.
        try:
            wait = float(seconds)
        except (TypeError, ValueError, OverflowError):
            wait = math.nan
        if not math.isfinite(wait):
            raise InvalidInput(
                f"{type(self).__name__}: the wait must be a finite number of seconds, not {shown(seconds)}"
            )
        if wait > MAX_SECONDS:
            raise InvalidInput(
                f"{type(self).__name__}: the wait must be at most {MAX_SECONDS:,} seconds, not {shown(seconds)}"
            )
        self.seconds = max(0.0, wait)


class ChunkFailed(WorqrError):
    """Raised by a chunk handler (``@handler(..., chunk=n)``) to fail only some of its tasks:
    ``ChunkFailed({task.id: exception, ...})``. Each task named fails with its own exception (and
    is retried per its own policy); every other task of the chunk completes."""

    def __init__(self, failures):
        # An Exception, as ``except Exception`` catches: a SystemExit, KeyboardInterrupt or
        # CancelledError is not a task's error (a CancelledError would read as a cancel).
        if not isinstance(failures, dict) or not all(
            isinstance(k, str) and isinstance(v, Exception) for k, v in failures.items()
        ):
            raise TypeError("ChunkFailed takes a dict of task id (str) -> exception (an instance of Exception)")
        first = next(iter(failures.items()), None)
        why = f" (the first, {first[0]}: {type(first[1]).__name__}: {first[1]})" if first else ""
        super().__init__(f"{len(failures)} task(s) of the chunk failed{why}")
        self.failures = failures


class RateLimited(RetryLater):
    """Raised by a handler when the service it calls answers "too many requests" (HTTP 429):
    the task goes back first in line without using an attempt, and its whole queue (or only the
    task's partition, when its handler has ``partition=``) starts nothing for ``retry_after``
    seconds, on any worker (``Queue.limits()["held_until"]``; ``set_limits(reset=True)`` ends it)."""

    def __init__(self, retry_after, message=None):
        if isinstance(retry_after, bool) or not isinstance(retry_after, (int, float)) or not retry_after >= 0:
            raise InvalidInput(f"RateLimited: retry_after must be a number of seconds >= 0, not {shown(retry_after)}")
        if not is_finite(retry_after) or retry_after > MAX_SECONDS:  # an infinite hold stopped its queue for good
            raise InvalidInput(
                f"RateLimited: retry_after must be at most {MAX_SECONDS:,} seconds, not {shown(retry_after)}"
            )
        super().__init__(retry_after, message or f"rate limited: held for {retry_after:g} s")
        self.retry_after = float(retry_after)


class RedisUnavailable(WorqrError):
    """An enqueue could not reach Redis within ``WORQR["ENQUEUE_RETRY_FOR"]`` seconds of retries
    (``durable=True`` keeps the tasks in the outbox instead). Its ids, in the order given:

    - ``added``: acknowledged by Redis (their tasks are in);
    - ``unknown``: sent, but no reply came: they may have been added (and may even have run).
      Enqueueing them again with ``ids=`` adds only those that were not (an id is never added
      twice while its task exists, nor once it ended lately: README "Guarantees");
    - ``not_added``: certainly not added (never sent, or refused before Redis could run them).

    ``queue`` is the queue's name. The message gives the counts and the unknown ids."""

    def __init__(self, message, queue="", added=(), unknown=(), not_added=()):
        super().__init__(message)
        self.queue = queue
        self.added, self.unknown, self.not_added = list(added), list(unknown), list(not_added)
