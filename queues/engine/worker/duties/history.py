"""Pruning the record of ended tasks (``engine.history``): every ``history.PRUNE_EVERY`` seconds,
each served queue's records past ``WORQR["RETENTION"]`` go, in bounded script calls, on a thread
(plain calls on the synchronous client)."""

import asyncio
import time

from ... import history


class HistoryPruning:
    what = "history pruning"

    def __init__(self, connection, config, queues, every=history.PRUNE_EVERY):
        self.connection, self.retention, self.queues, self.every = connection, config.retention, queues, every
        self.pruned_at = float("-inf")  # when the queues were last pruned (monotonic; never)

    async def run(self, _beat_client):
        if time.monotonic() - self.pruned_at < self.every:
            return
        self.pruned_at = time.monotonic()
        for q in self.queues:
            await asyncio.to_thread(history.prune, self.connection.client, q, self.retention)
