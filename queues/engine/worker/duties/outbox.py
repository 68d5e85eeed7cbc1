"""The outbox sweep, the worker's part in workflows (``after=``, batches) that a beat drives: the
outbox entries of its queues older than a few seconds (left by a process that died between a
task's end and telling its children; ``workflows.sweep``) and the batches whose callbacks are
still due (``batches.sweep``), each bounded. Every step is idempotent, so a drain (``linker``)
racing the sweep changes nothing twice. On a thread with the synchronous client."""

import asyncio

from ... import batches, workflows


class OutboxSweep:
    what = "outbox sweep"

    def __init__(self, connection, queues):
        self.connection, self.queues = connection, queues

    async def run(self, _beat_client):
        await asyncio.to_thread(self.sweep)

    def sweep(self):
        client = self.connection.client
        now = int(client.time()[0]) * 1000
        for q in self.queues:
            workflows.sweep(client, q, now)
        batches.sweep(client, now)
