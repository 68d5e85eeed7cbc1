"""Chunk handlers the tests run in real worker processes (tests/test_chunks.py).

Each call RPUSHes its size to "test:chunk-started:<queue>" as it starts (sync handlers), and one record to "test:chunks:<queue>": the ids of its chunk, the worker's pid,
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

from queues import ChunkFailed, handler
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
