"""Gone workers: the registry's dead workers noted in the list of gone workers (``upkeep``).

1. After a beat that reaped workers (``saw_reaped``), the registered workers whose heartbeat key
   is gone are noted as reaped (``upkeep.note_gone_workers``; a failure is tried again at the
   next round).
2. Otherwise, every ``upkeep.GONE_CHECK_EVERY`` seconds, the same check if no worker of all took
   the turn meanwhile (``upkeep.note_gone_workers_due``): a worker that died alone on its queues
   (no beat of another reaps it) is noted too, with no dashboard open.
"""

import asyncio
import time

from ... import upkeep


class GoneWorkers:
    what = "gone workers"

    def __init__(self, connection, every=upkeep.GONE_CHECK_EVERY):
        self.connection, self.every = connection, every
        self.reaped_seen = False  # workers were reaped: the gone ones are to be noted
        self.checked_at = float("-inf")  # when the registry was last checked (monotonic; never)

    def saw_reaped(self, dead):
        """A beat reaped ``dead`` workers."""
        self.reaped_seen = self.reaped_seen or dead > 0

    async def run(self, _beat_client):
        if self.reaped_seen:
            self.reaped_seen = False
            try:
                await asyncio.to_thread(upkeep.note_gone_workers, self.connection.client)
            except BaseException:
                self.reaped_seen = True  # noted at the next round
                raise
        elif time.monotonic() - self.checked_at >= self.every:
            self.checked_at = time.monotonic()
            await asyncio.to_thread(upkeep.note_gone_workers_due, self.connection.client, self.every)
