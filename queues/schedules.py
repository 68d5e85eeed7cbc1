"""Periodic tasks from Django: ``from queues import schedules``.

::

    schedules.all()              # [Schedule]: name, queue, cron or every, timezone, payload,
                                 # next_run, last_run, last_task_id, paused, missed, overlap ...
    schedules.get("ping")        # one, or None
    schedules.pause("ping"); schedules.resume("ping")    # durable
    schedules.trigger("ping")    # enqueue one run now (the next tick stays); returns the task id
    schedules.create("ping", queue="default", every=60, payload="...")   # made at run time
    schedules.update("ping", every=120); schedules.delete("ping")          # live ones only

Schedules are declared in ``settings.WORQR["SCHEDULES"]`` and synced to Redis when a worker
starts, or made at run time (``create``; ``engine.live_schedules``): every worker fires them from
their next tick on, without a restart. These functions read and change what Redis has. An unknown name raises
``ScheduleNotFound`` (``get`` returns None). The engine's side is ``queues.engine.schedules``.
"""

from .conf import get_connection
from .engine import live_schedules as _live
from .engine import schedules as _engine
from .engine.errors import ScheduleNotFound
from .engine.schedules import Schedule

__all__ = ["Schedule", "ScheduleNotFound", "all", "create", "delete", "get", "pause", "resume", "trigger", "update"]


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


def create(name, **settings):
    """Make schedule ``name`` at run time: ``queue=``, ``cron=`` or ``every=``, ``payload=``,
    ``timezone=``, ``missed=``, ``overlap=``, ``enabled=`` and the enqueue options ``retries``,
    ``timeout``, ``backoff``, ``lock``, ``callback``. Raises InvalidSchedule (nothing written)."""
    return _engine.get(_client(), _live.create(_client(), name, config=get_connection().config, **settings).name)


def update(name, **fields):
    """Change the settings of a schedule made at run time (its next tick follows them)."""
    return _engine.get(_client(), _live.update(_client(), name, config=get_connection().config, **fields).name)


def delete(name):
    """Delete a schedule made at run time: no run after this."""
    _live.delete(_client(), name)
