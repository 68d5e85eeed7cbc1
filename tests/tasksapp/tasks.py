"""Tasks framework functions the Tasks backend tests run in real worker processes.

Backend "default" serves the queues dt-default and dt-emails (no retries); backend "retrying"
serves dt-retry (two retries, short backoff). Functions that leave a trace RPUSH it to the Redis
list "test:dt:<name>"; the receivers of task_started and task_finished (connected below, so in
every worker that runs one of these functions) RPUSH to "test:dt:signals".
"""

import asyncio
import json
import os
import time

from django.contrib.auth.models import User

from queues.backends.framework import TaskContext, task_finished, task_started
from queues.engine.connection import get_default

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


def _trace(name, **record):
    get_default().client.rpush(f"test:dt:{name}", json.dumps(dict(record, pid=os.getpid(), at=time.time())))


@task(queue_name="dt-default")
def add(a, b):
    _trace("add", a=a, b=b)
    return {"sum": a + b, "args": [a, b]}


@task(queue_name="dt-default")
def returns_none():
    return None


@task(queue_name="dt-default")
def fails(message):
    raise ValueError(message)


@task(queue_name="dt-default")
def returns_object():
    return object()


@task(queue_name="dt-default")
async def async_double(x):
    await asyncio.sleep(0.01)
    return x * 2


@task(queue_name="dt-emails", priority=10)
def send_welcome(user_id):
    _trace("send_welcome", user_id=user_id)
    return f"welcome {user_id}"


@task(queue_name="dt-default")
def user_exists(username):
    """The on_commit tests' probe: is the row the enqueueing transaction wrote visible?"""
    return User.objects.filter(username=username).exists()


@task(queue_name="dt-retry", backend="retrying", takes_context=True)
def flaky(context, succeed_on):
    _trace("flaky", attempt=context.attempt, result_id=context.task_result.id)
    if context.attempt < succeed_on:
        raise RuntimeError(f"attempt {context.attempt} fails")
    return context.attempt


# -- the contract tests' functions (tests/test_tasks_backend.py) -----------------------


@task(queue_name="dt-default")
def noop(*args, **kwargs):
    return None


@task(queue_name="dt-default")
async def noop_async(*args, **kwargs):
    return None


@task(queue_name="dt-default")
def meaning_of_life():
    return 42


@task(queue_name="dt-default")
def escapes(kind):
    """Raise SystemExit or KeyboardInterrupt (BaseExceptions that are not Exceptions)."""
    raise {"SystemExit": SystemExit, "KeyboardInterrupt": KeyboardInterrupt}[kind](f"{kind} from a task")


@task(queue_name="dt-default")
def calls_exit():
    exit(1)


@task(queue_name="dt-default")
def nested_exception():
    raise ValueError(ValueError("the inner error"))


@task(queue_name="dt-default")
def sleeps(seconds):
    time.sleep(seconds)
    return os.getpid()


@task(queue_name="dt-default", takes_context=True)
def own_id(context):
    return context.task_result.id


@task(queue_name="dt-default", takes_context=True)
def context_of(context):
    """What a takes_context task sees of its context, as JSON."""
    result = context.task_result
    return {
        "is_context": isinstance(context, TaskContext),
        "attempt": context.attempt,
        "id": result.id,
        "status": str(result.status),
        "args": result.args,
    }


def _record_signal(sender, task_result, **kwargs):
    """Keep what task_started/task_finished receivers see (sent in the worker process)."""
    times = {k: getattr(task_result, k) for k in ("enqueued_at", "started_at", "finished_at")}
    _trace(
        "signals",
        sender=sender.__name__,
        id=task_result.id,
        status=str(task_result.status),
        **{k: v.isoformat() if v else None for k, v in times.items()},
    )


task_started.connect(_record_signal, dispatch_uid="tests.tasksapp.started")
task_finished.connect(_record_signal, dispatch_uid="tests.tasksapp.finished")


@task(queue_name="dt-default", takes_context=True)
def slow_first_time(context):
    """Hang on the first attempt (the test kills its worker meanwhile); answer at once after."""
    _trace("slow_first_time", attempt=context.attempt)
    if context.attempt == 1:
        time.sleep(60)
    return context.attempt


@task(queue_name="dt-default")
def big_result(size):
    """A return value of ``size`` characters (its acknowledgement is one call that large)."""
    return "r" * size


@task(queue_name="dt-default")
async def big_result_async(size):
    """The same from an ``async def`` function."""
    return "a" * size


@task(queue_name="dt-default")
def chart_slow():
    """Two functions of one queue with different run times (tests/test_handler_charts.py)."""
    time.sleep(0.3)


@task(queue_name="dt-default")
def chart_fast():
    return None
