"""Generator handlers (checkpoints) the tests run in real worker processes.

Payloads are JSON objects: ``n`` steps (from ``task.checkpoint`` or 0), ``sleep`` seconds per
step, ``log`` the Redis list each step RPUSHes ``"<step> <time.time()>"`` to (``<log>:runs``
gets one JSON record per run: where it began, its run count, the worker's pid), ``yield`` a
value to yield in place of the step (``"object"``: one that isn't JSON; ``"big"``: 70,000 bytes),
``watch`` true: before each step, read the task's saved checkpoint from Redis and RPUSH
``"<checkpoint> <when it was saved, ms>"`` to ``<log>:saves`` each time it changed (the
generator waits for each save, so it sees them all).
"""

import asyncio
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
