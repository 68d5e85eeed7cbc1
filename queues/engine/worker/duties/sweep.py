"""The queue sweep: a step at every round (``engine.sweep.Sweep``: one worker at a time, the
holder of its lease, goes through every known queue, summing their counts and forgetting those
left idle), on a thread with the synchronous client."""

import asyncio

from ...sweep import Sweep


class QueueSweep:
    what = "queue sweep"

    def __init__(self, name, config, connection):
        self.sweep = Sweep(name, config)
        self.connection = connection

    async def run(self, _beat_client):
        await asyncio.to_thread(self.sweep.step, self.connection.client)
