"""The benchmark's no-op handler for worqr's queue "bench" (installed by bench.worqr_settings).

The payload is the harness's filler string, or "<ts>|<filler>" for a latency job: the handler
hands ts (a time.time() value) to common.job_done, which is the same INCR (+ RPUSH) as every
contender's job. WORQR_BENCH_ASYNC=1 registers an ``async def`` handler instead (no thread hop;
the job's Redis writes go through one asyncio client per worker process). WORQR_BENCH_CHUNK=N
registers a chunk handler of up to N tasks per call (only set when worqr's @handler takes
``chunk=``): one INCRBY for the chunk, as a handler given many tasks at once does its work once.
"""

import os
import time

from queues import handler

import common

QUEUE = "bench"


def _ts(payload):
    head, sep, _ = payload.partition("|")
    return float(head) if sep else None


CHUNK = int(os.environ.get("WORQR_BENCH_CHUNK") or 0)


def _chunk_done(pipe, tasks):
    """The chunk's writes on a pipeline: the counter by the chunk's size, each probe's latency."""
    now = time.time()
    pipe.incrby(common.DONE_KEY, len(tasks))
    for ts in filter(None, (_ts(t.payload) for t in tasks)):
        pipe.rpush(common.LATENCY_KEY, (now - ts) * 1000)
    return pipe


if CHUNK and os.environ.get("WORQR_BENCH_ASYNC") == "1":
    import redis.asyncio

    _client = None

    @handler(QUEUE, chunk=CHUNK)
    async def noop_chunk(tasks):
        global _client
        if _client is None:
            _client = redis.asyncio.Redis.from_url(common.REDIS_URL)
        await _chunk_done(_client.pipeline(transaction=False), tasks).execute()

elif CHUNK:
    import redis

    _client = redis.Redis.from_url(common.REDIS_URL)

    @handler(QUEUE, chunk=CHUNK)
    def noop_chunk(tasks):
        _chunk_done(_client.pipeline(transaction=False), tasks).execute()

elif os.environ.get("WORQR_BENCH_ASYNC") == "1":
    import redis.asyncio

    _client = None

    @handler(QUEUE)
    async def noop(task):
        global _client
        if _client is None:
            _client = redis.asyncio.Redis.from_url(common.REDIS_URL)
        await common.job_done_async(_client, _ts(task.payload))

else:

    @handler(QUEUE)
    def noop(task):
        common.job_done(_ts(task.payload))
