"""How a Tasks framework call travels as a worqr task, and runs on ``manage.py worker``.

The payload is JSON text (so the dashboard shows it as it is)::

    {"worqr_task": 1, "path": "app.tasks.send_welcome", "args": [42], "kwargs": {},
     "context": false, "priority": 10, "queue": "emails", "backend": "default",
     "run_after": "2030-01-01T00:00:00+00:00" | null}

``run`` is the handler of every queue a ``WorqrBackend`` serves. For each delivery it:

1. decodes the payload and imports the ``@task`` by its path;
2. sends ``task_started`` (the result's times are Redis's: ``started_at`` is when worqr started
   this attempt), calls the function (an ``async def`` one on its own event loop, which
   is cancelled when worqr cancels the task or it times out; a sync one in the worker's thread),
   with a ``TaskContext`` first if the task takes context (its ``attempt`` is worqr's);
3. returns ``{"value": <return value as JSON>, "worker": <name>}`` for worqr to keep as the
   result (never empty, so a task returning None still has a result; worqr forgets the worker
   of a completed task, the result remembers it); a value that is not JSON fails the task;
4. lets an exception propagate, so worqr's retries, backoff and failed set apply unchanged;
5. sends ``task_finished`` once the task is finished for good (succeeded, or failed with no
   retries left), ``finished_at`` read from Redis's clock as the function returns (worqr then
   records the outcome, a moment later, as the ``finished_at`` that ``get_result()`` shows).
"""

import asyncio
import builtins
import copy
import inspect
import json
import logging
import re
import time
import traceback
from dataclasses import replace
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from django.utils.module_loading import import_string

from ..conf import get_connection
from ..engine import errors as engine_errors
from ..engine import readmodel
from ..engine.registry import get_handler
from ..engine.task import ms_to_datetime
from .framework import (
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_finished,
    task_started,
)

log = logging.getLogger("worqr")

FORMAT = 1


def encode(task, args, kwargs, backend):
    """The payload for a call of ``task`` (args already normalised by TaskResult)."""
    return json.dumps(
        {
            "worqr_task": FORMAT,
            "path": task.module_path,
            "args": args,
            "kwargs": kwargs,
            "context": task.takes_context,
            "priority": task.priority,
            "queue": task.queue_name,
            "backend": backend,
            "run_after": task.run_after.isoformat() if task.run_after else None,
        },
        separators=(",", ":"),
    )


def decode(payload):
    """The payload's dict, or None if it is not a Tasks framework payload."""
    if not isinstance(payload, str):
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("worqr_task") != FORMAT:
        return None
    return data


def load_task(data):
    """The ``Task`` the payload names, with the queue, priority, run_after and backend it was sent
    with. A backend that is no alias of ``TASKS`` (a ``WorqrBackend`` made directly) can't be
    named by a Task (the framework looks it up by alias): the task keeps the backend its
    ``@task`` gave it, as it was when enqueued, and is not validated against it again."""
    found = import_string(data["path"])
    if not isinstance(found, Task):
        raise TypeError(f"{data['path']} is not a Tasks framework task")
    run_after = datetime.fromisoformat(data["run_after"]) if data.get("run_after") else None
    fields = {"queue_name": data["queue"], "priority": data["priority"], "run_after": run_after}
    if data["backend"] in task_backends.settings:
        return replace(found, backend=data["backend"], **fields)
    loaded = copy.copy(found)
    for name, value in fields.items():
        object.__setattr__(loaded, name, value)  # a frozen dataclass, as the framework sets its own
    return loaded


def framework_time(value):
    """A time of worqr's (aware, UTC) as the Tasks framework's times are: naive, in
    ``TIME_ZONE``, when ``USE_TZ`` is False (as ``timezone.now()`` is then)."""
    if value is None or settings.USE_TZ or timezone.is_naive(value):
        return value
    return timezone.make_naive(value, timezone.get_default_timezone())


def eta(run_after):
    """A task's ``run_after`` as worqr's ``eta``: a naive one (allowed only with ``USE_TZ`` False) is
    in ``TIME_ZONE``, as Django reads naive times then, not in UTC."""
    if run_after is None or timezone.is_aware(run_after):
        return run_after
    return timezone.make_aware(run_after, timezone.get_default_timezone())


def exception_path(error, trace):
    """The dotted path of the exception class in a worqr error/traceback pair.

    The last line of the final traceback names the class (``module.Class: message``; builtins
    bare). Errors worqr makes itself (a timeout, a lost worker) map to real classes.
    """
    name = ""
    lines = (trace or "").splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last):"):
            name = next((ln for ln in lines[i + 1 :] if ln and not ln[0].isspace()), "")
            break
    name = (name or error or "").split(":", 1)[0].strip()
    if not name.replace(".", "").replace("_", "").isalnum():
        return "builtins.Exception"
    if "." in name:
        return name
    if name == "TaskTimeout":
        return "builtins.TimeoutError"
    if isinstance(getattr(engine_errors, name, None), type):
        return f"queues.engine.errors.{name}"
    return f"builtins.{name}" if isinstance(getattr(builtins, name, None), type) else "builtins.Exception"


def task_error(error, trace):
    return TaskError(exception_class_path=exception_path(error, trace), traceback=trace or error or "")


def _final_attempt(task):
    if task.retries is not None:
        retries = task.retries
    else:
        spec = get_handler(task.queue)
        retries = spec.retries if spec is not None and spec.retries is not None else None
        if retries is None:
            retries = get_connection().config.retries
    return task.attempt > retries


def _call_async(func, args, kwargs, wtask):
    """Run a coroutine function on a loop of its own; cancel it when worqr cancels the task."""

    async def main():
        job = asyncio.ensure_future(func(*args, **kwargs))
        while not job.done():
            await asyncio.wait({job}, timeout=0.05)
            if wtask.cancelled and not job.done():
                job.cancel()
                await asyncio.wait({job})
                return None  # the outcome of a cancelled task is discarded
        return job.result()

    return asyncio.run(main())


def run(wtask):
    """The worqr handler of every Tasks backend queue (see the module docstring)."""
    data = decode(wtask.payload)
    if data is None:
        raise ValueError(f"task {wtask.id}: payload is not a Django Tasks call")
    client = get_connection().client
    fw_task = load_task(data)
    stored = readmodel.task(client, wtask.id)
    worker = (stored.worker or "") if stored else ""
    now = framework_time(stored.started_at if stored else None) or _redis_now(client)
    result = TaskResult(
        task=fw_task,
        id=wtask.id,
        status=TaskResultStatus.RUNNING,
        enqueued_at=framework_time(stored.created_at) if stored else None,
        started_at=now,
        last_attempted_at=now,
        finished_at=None,
        args=data["args"],
        kwargs=data["kwargs"],
        backend=data["backend"],
        errors=[],
        worker_ids=[""] * (wtask.attempt - 1) + [worker],
    )
    task_started.send(type(fw_task.get_backend()), task_result=result)
    args = [TaskContext(task_result=result), *result.args] if fw_task.takes_context else result.args
    close_old_connections()
    started = time.monotonic()
    try:
        if inspect.iscoroutinefunction(fw_task.func):
            value = _call_async(fw_task.func, args, result.kwargs, wtask)
        else:
            value = fw_task.func(*args, **result.kwargs)
        value = normalize_json(value)
        out = json.dumps({"value": value, "worker": result.worker_ids[-1]})
    except BaseException as exc:
        _finished(client, wtask, result, started, exc)
        raise
    finally:
        close_old_connections()
    object.__setattr__(result, "_return_value", value)
    _finished(client, wtask, result, started, None)
    return out


#: The start of every payload ``encode`` writes, up to the function's path (its first fields).
_PATH_AT = re.compile(r'\{"worqr_task":1,"path":"([A-Za-z0-9_.]{1,200})"')


def handler_name(wtask):
    """The function a delivery calls (its path), which the worker sends with its outcome so the
    dashboard charts each ``@task`` of a queue apart (``run.worqr_handler_name``); None for a
    payload ``encode`` did not write. Read from the payload's first bytes, not parsed whole."""
    payload = wtask.payload
    found = _PATH_AT.match(payload, 0, 256) if isinstance(payload, str) else None
    return found.group(1) if found else None


run.worqr_handler_name = handler_name  # type: ignore[attr-defined]


def _redis_now(client):
    """Redis's clock, in ms like the times worqr records, so a signal's times and get_result()'s
    come from one clock."""
    return framework_time(ms_to_datetime(readmodel.server_ms(client)))


def _finished(client, wtask, result, started, exc):
    if wtask.cancelled or (exc is not None and not _final_attempt(wtask)):
        return
    object.__setattr__(result, "finished_at", _redis_now(client))
    if exc is None:
        object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    else:
        path = f"{type(exc).__module__}.{type(exc).__qualname__}"
        trace = "".join(traceback.format_exception(exc))
        result.errors.append(TaskError(exception_class_path=path, traceback=trace))
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
    task_finished.send(type(result.task.get_backend()), task_result=result)
