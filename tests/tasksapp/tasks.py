"""Tasks framework functions the Tasks backend tests run in real worker processes.

Backend "default" serves the queues dt-default and dt-emails (no retries); backend "retrying"
serves dt-retry (two retries, short backoff). Functions that leave a trace RPUSH it to the Redis
list "test:dt:<name>".
"""

import asyncio
import json
import os
import time

from django.contrib.auth.models import User

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
