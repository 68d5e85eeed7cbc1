"""The worker's part in workflows (``after=``, batches): telling children and batches that tasks
ended, a step that runs outside the script that ended them (they live in other slots).

Told over its control channel (``o <queue>``) that a task it ended has children or a batch, the
worker drains that queue's outbox at once (``workflows.drain_all``). What a process that died
between the two steps left is drained by the outbox sweep, one of the heartbeat's duties
(``duties.outbox``). Every step is idempotent, so a drain racing a sweep changes nothing twice.

The drains use the synchronous client, in a thread, so the event loop never waits on them.
"""

import asyncio
import logging

from .. import faults, workflows
from ..backoff import wait_event
from ..connection import NETWORK_ERRORS

log = logging.getLogger("worqr.worker")


class Linker:
    def __init__(self, connection, retry_after):
        """Drains with ``connection``'s client; a drain that failed is tried again ``retry_after``
        seconds later (or at the next message)."""
        self.connection, self.retry_after = connection, retry_after
        self.wanted = set()
        self.event = asyncio.Event()

    def on_outbox(self, queue):
        self.wanted.add(queue)
        self.event.set()

    async def run(self):
        failing = False
        await faults.deaf("linker-deaf")
        while True:
            await wait_event(self.event, self.retry_after if self.wanted else None)
            self.event.clear()
            queues, self.wanted = self.wanted, set()
            try:
                for q in sorted(queues):
                    await asyncio.to_thread(workflows.drain_all, self.connection.client, q)
                failing = False
            except NETWORK_ERRORS as exc:
                # Once per outage: the heartbeat's lines say when Redis is out of reach and back.
                level = logging.DEBUG if failing else logging.WARNING
                log.log(level, "worqr: telling children and batches failed (%s); the sweep retries", exc)
                self.wanted |= queues
                failing = True
            except Exception:  # never let one bad entry stop the worker's part: the sweep retries
                log.exception("worqr: telling children and batches failed; the sweep retries")
