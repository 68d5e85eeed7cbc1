"""The benchmark's no-op handler for worqr's queue "bench" (installed by bench.worqr_settings).

The payload is the harness's filler string, or "<ts>|<filler>" for a latency job: the handler
hands ts (a time.time() value) to common.job_done, which is the same INCR (+ RPUSH) as every
contender's job. WORQR_BENCH_ASYNC=1 registers an ``async def`` handler instead (no thread hop;
the job's Redis writes go through one asyncio client per worker process).
"""

import os

from queues import handler

import common

QUEUE = "bench"


def _ts(payload):
    head, sep, _ = payload.partition("|")
    return float(head) if sep else None


if os.environ.get("WORQR_BENCH_ASYNC") == "1":
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
