"""The codes the Lua scripts return, defined once: the loader writes them into the scripts
(``@@STALE@@`` and so on) and ``commands`` reads replies and turns errors into exceptions.

Positive codes say what happened to a task; negative ones why nothing happened to it.
"""

from enum import IntEnum


class Code(IntEnum):
    # what happened to a task
    COMPLETED = 1
    CANCELLED = 2
    RETRYING = 3
    FAILED = 4
    DEFERRED = 5
    REQUEUED = 6
    REMOVED = 7
    STOPPING = 8
    DELETED = 9
    # how a worker's call went
    OK = 10
    PAUSED = 11
    MORE = 12
    # what a schedule's tick gave (schedules.py)
    SKIPPED = 20  # no run for this tick: its last run is still live (overlap), or missed: 'skip'
    MISSED = 21  # the tick is late (an outage): call again in 'missed' mode
    EARLY = 22  # the tick is not due yet by Redis's clock
    # why nothing happened
    STALE = -1  # the lease is not the task's current one, or the task is not active
    UNKNOWN = -2  # no such task (never existed, or finished)
    ACTIVE = -3  # the task is running: cancel it instead
    NOT_FAILED = -4  # only a failed task can be retried
    FINISHED = -5  # failed or completed: delete it instead
    NOT_REGISTERED = -6  # the worker is not registered in the queue (it was presumed dead)
    NOT_FINISHED = -7  # not failed or completed, and only those were to be deleted: cancel it instead
    NO_QUEUE = -8  # the queue does not exist, and the call was not to make it
    LATE = -9  # the worker's heartbeat deadline has passed: it gets no task until it beats
    NOT_DELAYED = -10  # only a delayed task can be run now


def lua_placeholders():
    """{'STALE': '-1', ...} for the loader."""
    return {code.name: str(int(code)) for code in Code}
