"""Depth sampling: each served queue's depth recorded for the dashboard's history, every
``EVERY`` seconds (the first sample of a minute wins, whichever worker takes it;
``upkeep.depth_writes``), on the worker's asyncio client; samples left past their age by a gap
are swept (``upkeep.sweep_depth``)."""

import asyncio
import time

from ... import commands, upkeep

#: Seconds between two depth samples of a worker (twice a minute: one per minute is kept).
EVERY = 30.0


class DepthSampler:
    what = "depth sampling"

    def __init__(self, redis, connection, queues, every=EVERY):
        self.redis, self.connection, self.queues, self.every = redis, connection, queues, every
        self.sampled_at = float("-inf")  # when the queues' depth was last sampled (monotonic; never)

    async def run(self, _beat_client):
        if time.monotonic() - self.sampled_at < self.every:
            return
        self.sampled_at = time.monotonic()
        r = self.redis
        seconds, micros = await r.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        for q in self.queues:
            counts = (await commands.counts(q).arun(r)).counts
            minute, hour, depth = upkeep.depth_sample(counts, now_ms)
            async with r.pipeline(transaction=False) as p:
                upkeep.depth_writes(p, q, minute, hour, depth)
                size = (await p.execute())[-1]
            if size > upkeep.DEPTH_MINUTES + upkeep.DEPTH_HOURS + 8:
                await asyncio.to_thread(upkeep.sweep_depth, self.connection.client, q, minute, hour)
