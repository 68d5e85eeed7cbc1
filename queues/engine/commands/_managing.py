"""Reading a queue's counts, and managing its tasks and itself: cancel, delete, retry, pause, limits,
purge, forget, drop."""

from dataclasses import dataclass

from ._call import Call, _code, _codes

#: Counters of a queue's stats hash that ``counts`` reads.
_STAT_NAMES = (
    "enqueued",
    "completed",
    "failed",
    "failures",
    "retried",
    "cancelled",
    "deleted",
    "waiting",
    "gone",
    "blocked",
    "plisted",
    "expired",
)


@dataclass(frozen=True)
class Counts:
    """A queue's counts, read at once: ``counts`` as ``readmodel.queue_counts`` gives them; the
    lengths of its front and pending lists and the number of runnable tasks listed in partitions
    (where a page of runnable tasks is read)."""

    counts: dict
    front: int
    listed: int
    partitioned: int


def _read_counts(reply):
    front, listed, delayed, active, failed, flat, paused, served = reply
    stats = dict(zip(flat[::2], flat[1::2]))
    counts = {name: int(stats.get(name.encode(), 0)) for name in _STAT_NAMES}
    gone = counts.pop("gone")
    partitioned = counts.pop("plisted")  # runnable tasks listed in their partitions
    counts["total_failed"] = counts.pop("failed")
    runnable = front + listed + partitioned - gone  # entries of removed tasks are skipped when reached
    counts.update(
        pending=runnable + counts["waiting"], runnable=runnable, delayed=delayed, active=active, failed=failed
    )
    counts["paused"] = bool(paused)
    counts["served"] = bool(served)  # a worker has registered for the queue (ever)
    return Counts(counts, front, listed, partitioned)


def counts(queue):
    """Read the queue's counts per state and lifetime counters in one step: returns ``Counts``."""
    return Call("counts", queue, (), _read_counts)


def cancel(queue, task_id):
    """REMOVED, STOPPING (it runs; its worker is told), UNKNOWN or FINISHED."""
    return Call("cancel", queue, (task_id,), _code)


def delete(queue, ids, finished_only=False):
    """One code per id: DELETED, UNKNOWN, ACTIVE, or NOT_FINISHED (``finished_only``: only
    failed and completed tasks are deleted)."""
    ids = list(ids)
    return Call("delete", queue, ("1" if finished_only else "0", len(ids), *ids), _codes)


def retry(queue, ids):
    """One code per id: REQUEUED, UNKNOWN or NOT_FAILED."""
    ids = list(ids)
    return Call("retry", queue, (len(ids), *ids), _codes)


def run_now(queue, task_id, where="front"):
    """Make a delayed task runnable now (``where``: 'front' or 'tail'): REQUEUED, UNKNOWN or NOT_DELAYED."""
    return Call("run_now", queue, (where, task_id), int)


def reseal(queue, items):
    """Replace sealed payloads still as read: ``items`` (id, payload read, new payload); the
    number replaced (``rotation``)."""
    return Call("reseal", queue, (len(items), *(x for item in items for x in item)), int)


def pause(queue, paused):
    """Pause (True) or resume; returns whether the state changed."""
    return Call("pause", queue, ("1" if paused else "0",), bool)


def set_limits(queue, overrides=None, *, reset=False):
    """Override the queue's limits (``overrides``: six values as ``Limits.script_args`` gives them,
    each a number, '-' for none or '' to leave as is), after dropping every override if ``reset``."""
    return Call("set_limits", queue, ("reset" if reset else "set", *(overrides or ("",) * 6)), int)


def purge(queue, limit):
    """Delete up to ``limit`` waiting-to-run tasks: returns (deleted, more)."""
    return Call("purge", queue, (limit,), lambda r: (int(r[0]), bool(r[1])))


def forget(queue, enqueued):
    """Forget the queue if it is still idle and empty, and nothing was enqueued since its
    ``enqueued`` counter read ``enqueued`` (``engine.sweep``): True if it was."""
    return Call("forget", queue, (int(enqueued),), bool)


def drop(queue, limit):
    """Drop up to ``limit`` tasks, then the queue's keys: returns True while tasks are left."""
    return Call("drop", queue, (limit,), bool)
