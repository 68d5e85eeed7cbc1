"""The worker's control channel: one subscription per worker, kept across reconnects.

Messages (published from Lua): ``w <queue>`` work is there; ``o <queue>`` tasks it ended have
children or a batch to tell (``linker``); ``d <queue> <ms>`` a delayed task is due in that many ms; ``c <queue> <id>`` stop that task; ``t <queue>\\n<fields>`` a task handed
straight to this worker. After every (re)subscribe the worker is told to take stock, so a
message lost while disconnected strands nothing and a cancel is never missed.
"""

import asyncio
import logging

from ..backoff import Backoff
from ..connection import NETWORK_ERRORS, apubsub, raise_if_cancelling

log = logging.getLogger("worqr.worker")


class Listener:
    def __init__(self, client, channel, on_message, on_subscribed):
        self.client, self.channel = client, channel
        self.on_message, self.on_subscribed = on_message, on_subscribed

    async def run(self):
        backoff, lost = Backoff(), False
        while True:
            pubsub = None
            try:
                pubsub = await apubsub(self.client)
                await pubsub.subscribe(self.channel)
                while True:
                    msg = await pubsub.get_message(ignore_subscribe_messages=False, timeout=30.0)
                    if msg is None:
                        await pubsub.ping()  # an idle link: make sure it is still there
                        continue
                    if msg["type"] == "subscribe":
                        backoff.reset()
                        lost = False
                        self.on_subscribed()
                    elif msg["type"] == "message":
                        self.on_message(msg["data"])
            except asyncio.CancelledError:
                raise
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                # Once per outage: the heartbeat's lines say when Redis is out of reach and back.
                log.log(
                    logging.DEBUG if lost else logging.WARNING, "worqr: control channel lost (%s); resubscribing", exc
                )
                lost = True
                await backoff.wait()
            finally:
                try:
                    if pubsub is not None:
                        await asyncio.shield(pubsub.aclose())
                except Exception:  # best effort: the connection may already be gone
                    pass
