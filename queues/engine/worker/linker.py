"""The worker's part in workflows (``after=``, batches): telling children and batches that tasks
ended, a step that runs outside the script that ended them (they live in other slots).

- told over its control channel (``o <queue>``) that a task it ended has children or a batch,
  the worker drains that queue's outbox at once (``workflows.drain``);
- every heartbeat interval it sweeps: the outbox entries of its queues older than a few seconds
  (left by a process that died between the two steps) and the batches whose callbacks are still
  due, each bounded. Every step is idempotent, so a drain racing a sweep changes nothing twice.

The drains use the synchronous client, in a thread, so the event loop never waits on them.
"""

import asyncio
import logging
import time

from .. import batches, workflows
from ..connection import NETWORK_ERRORS

log = logging.getLogger("worqr.worker")


class Linker:
    def __init__(self, worker):
        self.w = worker
        self.wanted = set()
        self.event = asyncio.Event()

    def on_outbox(self, queue):
        self.wanted.add(queue)
        self.event.set()

    async def run(self):
        c = self.w.config
        next_sweep, failing = time.monotonic() + c.heartbeat_interval, False
        while True:
            try:
                await asyncio.wait_for(self.event.wait(), max(0.01, next_sweep - time.monotonic()))
            except TimeoutError:
                pass
            self.event.clear()
            queues, self.wanted = self.wanted, set()
            try:
                for q in sorted(queues):
                    await asyncio.to_thread(workflows.drain_all, self.w.connection.client, q)
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + c.heartbeat_interval
                    await asyncio.to_thread(self.sweep)
                failing = False
            except NETWORK_ERRORS as exc:
                # Once per outage: the heartbeat's lines say when Redis is out of reach and back.
                level = logging.DEBUG if failing else logging.WARNING
                log.log(level, "worqr: telling children and batches failed (%s); the sweep retries", exc)
                self.wanted |= queues
                failing = True
            except Exception:  # never let one bad entry stop the worker's part: the sweep retries
                log.exception("worqr: telling children and batches failed; the sweep retries")

    def sweep(self):
        client = self.w.connection.client
        now = int(client.time()[0]) * 1000
        for q in self.w.queues:
            workflows.sweep(client, q, now)
        batches.sweep(client, now)
