"""Chunk handlers the tests run in real worker processes (tests/test_chunks.py).

Each call RPUSHes its size to "test:chunk-started:<queue>" as it starts (sync handlers; async ones its
ids and start to "test:chunk-calls:<queue>"), and one record to "test:chunks:<queue>" as it returns: the ids of its chunk, the worker's pid,
start and end (time.time()), and which tasks it was told were cancelled when it returned.
Payloads are JSON objects: ``fail`` true makes the handler fail that task through ChunkFailed
with the message "task <n> failed"; ``sleep`` (seconds, the chunk's longest counts) makes it
run that long, looking at ``task.cancelled`` every 10 ms; ``boom`` true makes it raise for the
whole chunk.
"""

import asyncio
import json
import os
import time

from queues import ChunkFailed, RetryLater, handler
from queues.engine.connection import get_default


def _directives(task):
    try:
        d = json.loads(task.payload)
        return d if isinstance(d, dict) else {}
    except (ValueError, TypeError):
        return {}


def _wait(tasks, seconds):
    end = time.time() + seconds
    while time.time() < end and not all(t.cancelled for t in tasks):
        time.sleep(0.01)


def _outcome(tasks, start):
    ds = [_directives(t) for t in tasks]
    rec = {
        "ids": [t.id for t in tasks],
        "pid": os.getpid(),
        "start": start,
        "end": time.time(),
        "cancelled": [t.id for t in tasks if t.cancelled],
    }
    get_default().client.rpush(f"test:chunks:{tasks[0].queue}", json.dumps(rec))
    if any(d.get("boom") for d in ds):
        raise RuntimeError("the whole chunk failed")
    failed = {t.id: ValueError(f"task {d.get('n')} failed") for t, d in zip(tasks, ds) if d.get("fail")}
    if failed:
        raise ChunkFailed(failed)


def chunk_sync(tasks):
    start = time.time()
    get_default().client.rpush(f"test:chunk-started:{tasks[0].queue}", len(tasks))
    _wait(tasks, max(float(_directives(t).get("sleep", 0)) for t in tasks))
    _outcome(tasks, start)


async def chunk_async(tasks):
    start = time.time()
    get_default().client.rpush(
        f"test:chunk-calls:{tasks[0].queue}", json.dumps({"ids": [t.id for t in tasks], "start": start})
    )
    await asyncio.sleep(max(float(_directives(t).get("sleep", 0)) for t in tasks))
    _outcome(tasks, start)


handler("chunk-emails", chunk=100, chunk_wait=0.5, retries=0)(chunk_sync)
handler("chunk-async", chunk=50, chunk_wait=0.3, retries=0)(chunk_async)
handler("chunk-proc", chunk=20, chunk_wait=0.3, retries=0, isolation="process")(chunk_sync)
handler("chunk-wait", chunk=100, chunk_wait=1.0, retries=0)(chunk_sync)
handler("chunk-lock", chunk=50, chunk_wait=0.3, retries=0, lock=lambda task: str(json.loads(task.payload)["k"]))(
    chunk_sync
)
handler("chunk-limit", chunk=100, chunk_wait=0.3, retries=0, concurrency=30)(chunk_sync)
handler("chunk-cancel", chunk=10, chunk_wait=0.2, retries=0)(chunk_sync)
handler("chunk-cancel-proc", chunk=10, chunk_wait=0.2, retries=0, isolation="process")(chunk_sync)


def chunk_defer(tasks):
    """Defers (RetryLater through ChunkFailed) each task whose payload says "defer", once."""
    r = get_default().client
    r.rpush(f"test:chunks:{tasks[0].queue}", json.dumps({"ids": [t.id for t in tasks]}))
    marked = [t for t in tasks if _directives(t).get("defer") and r.set(f"test:deferred:{t.id}", 1, nx=True)]
    if marked:
        raise ChunkFailed({t.id: RetryLater(0.5, "come back later") for t in marked})


def chunk_progress(tasks):
    """Reports each task's own progress and log line, then runs until the test saw them."""
    for t in tasks:
        t.progress(0.5, f"mine is {_directives(t)['n']}")
        t.log(f"line of {_directives(t)['n']}")
    r, end = get_default().client, time.time() + 30
    while time.time() < end and not r.exists(f"test:seen:{tasks[0].queue}"):
        time.sleep(0.05)


handler(
    "chunk-lock-async", chunk=5, chunk_wait=0.3, retries=1, backoff=0, lock=lambda task: json.loads(task.payload)["k"]
)(chunk_async)


async def plain_async(task):
    """A plain (one-task) handler recording its call as chunk_async does, for a worker that serves both."""
    start = time.time()
    get_default().client.rpush(f"test:chunk-calls:{task.queue}", json.dumps({"ids": [task.id], "start": start}))
    await asyncio.sleep(float(_directives(task).get("sleep", 0)))
    _outcome([task], start)


def chunk_wrong_ids(tasks):
    """Names its tasks by payload, not id: a mistake ChunkFailed must not turn into completions."""
    raise ChunkFailed({t.payload: ValueError("refused") for t in tasks})


handler("chunk-wrong-ids", chunk=5, chunk_wait=0.3, retries=0)(chunk_wrong_ids)
handler("chunk-slot", chunk=10, chunk_wait=0.5, retries=0)(chunk_async)
handler("plain-slot", retries=0)(plain_async)
# a partial chunk that waits long to fill, and a rate-limited queue (its idle workers are woken,
# not handed its tasks) served beside it
handler("chunk-wakewait", chunk=10, chunk_wait=8.0, retries=0)(chunk_async)
handler("plain-wake", rate="50/s", retries=0)(plain_async)
handler("chunk-defer-proc", chunk=5, chunk_wait=0.3, retries=0, isolation="process")(chunk_defer)
handler("chunk-progress-proc", chunk=3, chunk_wait=0.3, isolation="process")(chunk_progress)
# a rate lets 5 tasks start a second: chunks stay partial, and must start within the rate's grace
handler("chunk-rate", chunk=10, rate="5/s", retries=0)(chunk_sync)
# its tasks wait longer for their chunk than their timeout and grace (2 s in the tests) together
handler("chunk-waitlong", chunk=10, chunk_wait=6.0, timeout=1, retries=0)(chunk_sync)


# -- no-op handlers whose script calls are counted (tests/test_batched_take.py) ------------------


def noop(task):
    return None


async def anoop(task):
    return None


def chunk_noop(tasks):
    return None


handler("batch-noop")(noop)
handler("batch-anoop")(anoop)
handler("batch-chunk", chunk=100, chunk_wait=0.2)(chunk_noop)


# -- an async generator handler whose steps are marked (tests/test_checkpoint_cancel.py) ---------


async def steps_marked(task):
    """Steps that record their begin and end ("b <i>", "e <i>" on the payload's ``log``): a step cut
    off midway has a begin and no end."""
    d, client = json.loads(task.payload), get_default().client
    for i in range(task.checkpoint or 0, d["n"]):
        client.rpush(d["log"], f"b {i}")
        await asyncio.sleep(d["sleep"])
        client.rpush(d["log"], f"e {i}")
        yield i + 1


handler("ck-async-marked", checkpoint_every=0.2)(steps_marked)


# -- StopIteration as a handler's error (asyncio futures refuse it: it must still end the task) --


def chunk_stop_iteration(tasks):
    """Fails the task whose payload is "last" with StopIteration, through ChunkFailed."""
    raise ChunkFailed({t.id: StopIteration("no more rows") for t in tasks if t.payload == "last"})


def next_of_empty(task):
    """Raises StopIteration (next() of an exhausted iterator) when the payload is "empty"."""
    if task.payload == "empty":
        next(iter(()))


handler("chunk-stopiter", chunk=5, chunk_wait=0.3, retries=0)(chunk_stop_iteration)
handler("chunk-stopiter-proc", chunk=5, chunk_wait=0.3, retries=0, isolation="process")(chunk_stop_iteration)
handler("stopiter", retries=0)(next_of_empty)
