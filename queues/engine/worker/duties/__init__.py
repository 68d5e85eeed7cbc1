"""The periodic duties a worker does beside its heartbeat, one module each (as Oban's plugins):

- ``gone.GoneWorkers``: notes the workers the beats reaped, and checks the registry for workers
  that died alone on their queues (one worker of all takes each turn);
- ``depth.DepthSampler``: samples the depth of the queues served, for the dashboard's history;
- ``sweep.QueueSweep``: a step of the queue sweep (sums over every queue, idle queues forgotten);
- ``outbox.OutboxSweep``: drains the workflows' outbox entries a dead process left;
- ``master.MasterCheck``: through Sentinel with MIN_REPLICAS_ACK, asks where the master is;
- ``history.HistoryPruning``: prunes the served queues' record of ended tasks (``RETENTION``).

Each is an object with ``what`` (named in logs) and ``async run(beat_client)``, which does its
work if it is due (each keeps its own interval). ``Duties`` runs them in that order after every
beat that got through, in a task of its own (one round at a time), so that none of it holds the
next beat up. Best effort: a duty that fails is logged and tried again at a later beat; a network
error ends the round (the next duty would meet it too).
"""

import asyncio
import logging

from ...connection import NETWORK_ERRORS, raise_if_cancelling

log = logging.getLogger("worqr.worker")


class Duties:
    def __init__(self, duties):
        self.duties = list(duties)
        self.round = None  # the round under way (an asyncio task)

    def start(self, beat_client):
        """After a beat that got through: start a round unless one is under way."""
        if self.round is None or self.round.done():
            self.round = asyncio.get_running_loop().create_task(self.run(beat_client), name="heartbeat duties")

    async def run(self, beat_client):
        """One round: every duty that is due, in order."""
        for duty in self.duties:
            try:
                await duty.run(beat_client)
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                log.warning("worqr: heartbeat's side work failed (%s): %s", duty.what, exc)
                return
            except Exception:
                log.exception("worqr: heartbeat's side work failed (%s)", duty.what)

    def cancel(self):
        """Cancel the round under way; returns its task (None if there is none)."""
        if self.round is None:
            return None
        self.round.cancel()
        return self.round
