"""Schedules' calls: fire a tick, trigger a run, sync, remove, pause."""

from dataclasses import dataclass

from ..codes import Code
from ._call import Call


@dataclass(frozen=True)
class Fired:
    code: Code
    next_ms: int  # the schedule's next run, -1 if none (paused, disabled, gone)
    task_id: str | None
    late_ms: int
    is_new_queue: bool
    now_ms: int
    version: str | None  # the schedule's settings version in Redis


def _fired(reply):
    code, next_ms, task_id, late, new, now, version = reply
    return Fired(
        Code(code),
        int(next_ms),
        task_id.decode() or None if isinstance(task_id, bytes) else None,
        int(late),
        bool(new),
        int(now),
        version.decode() or None if isinstance(version, bytes) else None,
    )


def fire(queue, name, version, due_ms, next_ms, *, mode, grace_ms, task_id, meta):
    """Fire the tick ``due_ms`` of schedule ``name``: enqueue its run as ``task_id`` and move it to
    ``next_ms``, unless another call did first. ``mode``: 'tick' or 'missed'. Returns ``Fired``."""
    args = (name, version, int(due_ms), int(next_ms), mode, int(grace_ms), task_id, meta)
    return Call("fire", queue, args, _fired, durable="log")


def trigger(queue, name, task_id, meta, trace=""):
    """Enqueue one run of schedule ``name`` now (``trace``: the trigger's trace context): (OK or
    UNKNOWN, whether the queue was new)."""
    return Call("trigger", queue, (name, task_id, meta, trace), lambda r: (Code(r[0]), bool(r[1])), durable="strict")


def schedule_sync(queue, name, document, version, next_ms, *, enabled, paused_since=None):
    """Write a schedule's synced settings: 0 unchanged, 1 created, 2 changed."""
    args = (
        name,
        document,
        version,
        int(next_ms),
        "1" if enabled else "0",
        "" if paused_since is None else int(paused_since),
    )
    return Call("schedule_sync", queue, args, int)


def schedule_remove(queue, name):
    """Remove a schedule; returns whether it existed."""
    return Call("schedule_remove", queue, (name,), bool)


def schedule_pause(queue, name, paused, *, version="", next_ms=0):
    """Pause (True) or resume; 1 changed, 0 unchanged, or Code UNKNOWN / STALE (negative)."""
    return Call("schedule_pause", queue, (name, "1" if paused else "0", version, int(next_ms)), int)
