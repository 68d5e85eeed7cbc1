"""Generator handlers (checkpoints) the tests run in real worker processes.

Payloads are JSON objects: ``n`` steps (from ``task.checkpoint`` or 0), ``sleep`` seconds per
step, ``log`` the Redis list each step RPUSHes ``"<step> <time.time()>"`` to (``<log>:runs``
gets one JSON record per run: where it began, its run count, the worker's pid), ``yield`` a
value to yield in place of the step (``"object"``: one that isn't JSON; ``"big"``: 70,000 bytes;
``"surrogate"``: a string that isn't UTF-8; ``"deep"``: lists nested 101 levels deep),
``watch`` true: before each step, read the task's saved checkpoint from Redis and RPUSH
``"<checkpoint> <when it was saved, ms>"`` to ``<log>:saves`` each time it changed (the
generator waits for each save, so it sees them all).
"""

import asyncio
import functools
import json
import os
import time

from queues import handler
from queues.engine import keys
from queues.engine.connection import get_default


def _begin(task):
    d = json.loads(task.payload)
    client = get_default().client
    start = task.checkpoint or 0
    run = {"from": start, "runs": task.runs, "pid": os.getpid(), "attempt": task.attempt}
    client.rpush(d["log"] + ":runs", json.dumps(run))
    return d, client, start


def _odd(d, i):
    kind = d.get("yield")
    if kind == "object":
        return object()
    if kind == "big":
        return "x" * 70_000
    if kind == "surrogate":
        return f"step {i} \ud800"
    if kind == "deep":
        value = [i]
        for _ in range(100):
            value = [value]
        return value
    return i


def steps(task):
    """Step through ``n`` steps, yielding the next step's number after each."""
    d, client, start = _begin(task)
    seen = None
    for i in range(start, d["n"]):
        if d.get("watch"):
            saved, at = client.hmget(keys.task_key(task.queue, task.id), "ck", "ckt")
            if saved != seen:
                seen = saved
                client.rpush(d["log"] + ":saves", f"{saved.decode()} {at.decode()}")
        if d.get("sleep"):
            time.sleep(d["sleep"])
        client.rpush(d["log"], f"{i} {time.time()}")
        yield _odd(d, i + 1)
    return f"{d['n']} steps"


async def steps_async(task):
    """``steps`` as an async generator."""
    d, client, start = _begin(task)
    for i in range(start, d["n"]):
        await asyncio.sleep(d.get("sleep", 0))
        client.rpush(d["log"], f"{i} {time.time()}")
        yield _odd(d, i + 1)


handler("ck", checkpoint_every=0.2)(steps)
handler("ck-async", checkpoint_every=0.2)(steps_async)
handler("ck-timeout", checkpoint_every=0.2, timeout=1.5, retries=3, backoff=0)(steps)
handler("ck-async-timeout", checkpoint_every=0.2, timeout=1.5, retries=3, backoff=0)(steps_async)
handler("ck-fail", checkpoint_every=0.2, retries=0)(steps)
handler("ck-rare", checkpoint_every=3600)(steps)


def passing_on(func):
    """An ordinary decorator (functools.wraps) that passes the call on."""

    @functools.wraps(func)
    def call(task):
        return func(task)

    return call


def _collecting(func):
    """A decorator that returns the generator's values as a list, not the generator."""

    @functools.wraps(func)
    def call(task):
        return list(func(task))

    return call


handler("ck-collected", retries=0)(_collecting(steps))
handler("ck-wrapped", keep_result=True)(passing_on(steps))
handler("ck-async-wrapped")(passing_on(steps_async))


def finishing(task):
    """``n`` steps (``steps``), then after its last yield a finalisation of ``final`` seconds
    (``"final-begin"`` and ``"final-end"`` RPUSHed to ``log``)."""
    d, client, start = _begin(task)
    for i in range(start, d["n"]):
        time.sleep(d.get("sleep", 0))
        client.rpush(d["log"], f"{i} {time.time()}")
        yield i + 1
    client.rpush(d["log"], "final-begin")
    time.sleep(d["final"])
    client.rpush(d["log"], "final-end")


async def finishing_async(task):
    """``finishing`` as an async generator."""
    d, client, start = _begin(task)
    for i in range(start, d["n"]):
        await asyncio.sleep(d.get("sleep", 0))
        client.rpush(d["log"], f"{i} {time.time()}")
        yield i + 1
    client.rpush(d["log"], "final-begin")
    await asyncio.sleep(d["final"])
    client.rpush(d["log"], "final-end")


handler("ck-final", checkpoint_every=0.2)(finishing)
handler("ck-async-final", checkpoint_every=0.2)(finishing_async)


def close_raises(task):
    """``steps`` (no save on the way: an hour's interval) whose ``finally`` raises when it is
    closed at a stop."""
    d, client, start = _begin(task)
    try:
        for i in range(start, d["n"]):
            time.sleep(d.get("sleep", 0))
            client.rpush(d["log"], f"{i} {time.time()}")
            yield i + 1
    except GeneratorExit:
        raise RuntimeError("its cleanup failed") from None


async def close_raises_async(task):
    """``close_raises`` as an async generator."""
    d, client, start = _begin(task)
    try:
        for i in range(start, d["n"]):
            await asyncio.sleep(d.get("sleep", 0))
            client.rpush(d["log"], f"{i} {time.time()}")
            yield i + 1
    except GeneratorExit:
        raise RuntimeError("its cleanup failed") from None


handler("ck-close-raises", checkpoint_every=3600, retries=0)(close_raises)
handler("ck-async-close-raises", checkpoint_every=3600, retries=0)(close_raises_async)
