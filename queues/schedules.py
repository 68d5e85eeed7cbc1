"""Periodic tasks from Django: ``from queues import schedules``.

::

    schedules.all()              # [Schedule]: name, queue, cron or every, timezone, payload,
                                 # next_run, last_run, last_task_id, paused, missed, overlap ...
    schedules.get("ping")        # one, or None
    schedules.pause("ping"); schedules.resume("ping")    # durable
    schedules.trigger("ping")    # enqueue one run now (the next tick stays); returns the task id

Schedules are declared in ``settings.WORQR["SCHEDULES"]`` and synced to Redis when a worker
starts; these functions read and change what Redis has. An unknown name raises
``ScheduleNotFound`` (``get`` returns None). The engine's side is ``queues.engine.schedules``.
"""

from .conf import get_connection
from .engine import schedules as _engine
from .engine.errors import ScheduleNotFound
from .engine.schedules import Schedule

__all__ = ["Schedule", "ScheduleNotFound", "all", "get", "pause", "resume", "trigger"]


def _client():
    return get_connection().client


def all():  # noqa: A001  (the interface's name)
    """Every schedule, sorted by name."""
    return _engine.all(_client())


def get(name):
    """The schedule called ``name``, or None."""
    return _engine.get(_client(), name)


def pause(name):
    """Pause ``name`` for every worker, durably; returns whether it changed."""
    return _engine.pause(_client(), name)


def resume(name):
    """Resume ``name`` from its next tick (no catch-up); returns whether it changed."""
    return _engine.resume(_client(), name)


def trigger(name):
    """Enqueue one run of ``name`` now; returns its task id."""
    return _engine.trigger(_client(), name)
