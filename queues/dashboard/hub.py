"""One Redis pub/sub connection per server process for all of its dashboard sockets.

A ``Hub`` belongs to an event loop (a Daphne process runs one). Sockets add listeners to
channels (``add``) and to patterns (``add_pattern``: the overview hears every queue); the hub
subscribes to each once, on its single connection, and calls every listener with each message's
raw data. After its connection was lost and came back, it calls every listener with ``None``:
messages may have been missed, look again. ``watch(callback)`` tells a socket when the link is
lost (``callback(False)``) and back (``callback(True)``), so its page can say so. With no
listener left it unsubscribes and closes its connection, so an idle process holds none: 200
open dashboards in one process cost Redis one subscriber (tests/test_dashboard_live.py).

Listeners are plain functions called on the event loop; they must not block (schedule work).
"""

import asyncio
import logging

from ..conf import get_connection
from ..engine.backoff import Backoff
from ..engine.connection import NETWORK_ERRORS, apubsub

log = logging.getLogger("worqr.dashboard")

#: Seconds ``add`` waits for Redis to confirm a subscription before going on without it (the
#: listener then hears ``None`` once the subscription is made). Below Daphne's 5 s handshake
#: timeout, so a socket opens (and says Redis is down) when Redis is.
CONFIRM_TIMEOUT = 2.0

_hubs = {}  # event loop -> Hub
#: Prefix of a pattern among the hub's keys (no channel of worqr starts with it).
PATTERN = b"\x00p:"


async def _subscribe(pubsub, names):
    channels = [n for n in names if not n.startswith(PATTERN)]
    patterns = [n[len(PATTERN) :] for n in names if n.startswith(PATTERN)]
    if channels:
        await pubsub.subscribe(*channels)
    if patterns:
        await pubsub.psubscribe(*patterns)


def get_hub():
    """The hub of the running event loop (made on first use)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        for old in [other for other in _hubs if other.is_closed()]:
            del _hubs[old]
        hub = _hubs[loop] = Hub()
    return hub


class Hub:
    def __init__(self, connection=None):
        self.connection = connection
        self.listeners = {}  # channel (bytes), or PATTERN + pattern -> set of listeners
        self.watchers = set()  # callbacks told when the link goes down (False) and up (True)
        self.down = False
        self.confirmed = set()  # channels Redis confirmed on the current connection
        self._requested = set()  # channels a SUBSCRIBE was sent for on the current connection
        self._pubsub = None
        self._task = None
        self._changed = asyncio.Condition()

    def watch(self, callback):
        self.watchers.add(callback)

    def unwatch(self, callback):
        self.watchers.discard(callback)

    def _link(self, up):
        if self.down == (not up):
            return
        self.down = not up
        for callback in list(self.watchers):
            try:
                callback(up)
            except Exception:
                log.exception("worqr dashboard: a link watcher failed")

    async def add_pattern(self, pattern, listener):
        """Call ``listener(data)`` for each message on a channel matching ``pattern``."""
        await self.add(PATTERN + (pattern.encode() if isinstance(pattern, str) else pattern), listener)

    async def remove_pattern(self, pattern, listener):
        await self.remove(PATTERN + (pattern.encode() if isinstance(pattern, str) else pattern), listener)

    async def add(self, channel, listener):
        """Call ``listener(data)`` for each message on ``channel``; returns once subscribed."""
        channel = channel.encode() if isinstance(channel, str) else channel
        new = channel not in self.listeners
        self.listeners.setdefault(channel, set()).add(listener)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        elif new and self._pubsub is not None and channel not in self._requested:
            self._requested.add(channel)
            try:
                await _subscribe(self._pubsub, [channel])
            except NETWORK_ERRORS:
                pass  # the run loop reconnects and subscribes to every channel
        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(lambda: channel in self.confirmed), CONFIRM_TIMEOUT)
        except TimeoutError:
            log.warning("worqr dashboard: no confirmation of the subscription to %r yet", channel)

    async def remove(self, channel, listener):
        """Stop calling ``listener``; the last one gone closes the connection."""
        channel = channel.encode() if isinstance(channel, str) else channel
        listeners = self.listeners.get(channel)
        if listeners is None:
            return
        listeners.discard(listener)
        if listeners:
            return
        del self.listeners[channel]
        self.confirmed.discard(channel)
        self._requested.discard(channel)
        if not self.listeners and self._task is not None:
            # Detached at once: an add() arriving while this one stops starts a new run.
            task, self._task, self._pubsub = self._task, None, None
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        elif self._pubsub is not None:
            try:
                if channel.startswith(PATTERN):
                    await self._pubsub.punsubscribe(channel[len(PATTERN) :])
                else:
                    await self._pubsub.unsubscribe(channel)
            except NETWORK_ERRORS:
                pass

    async def _confirm(self, channel):
        async with self._changed:
            self.confirmed.add(channel)
            self._changed.notify_all()

    def _dispatch(self, channel, data):
        for listener in list(self.listeners.get(channel, ())):
            try:
                listener(data)
            except Exception:  # one socket's bug must not stop the others' messages
                log.exception("worqr dashboard: a listener of %r failed", channel)

    async def _run(self):
        redis = (self.connection or get_connection()).async_client(max_connections=2)
        backoff, missed = Backoff(0.1, 5.0), set()
        try:
            while self.listeners:
                pubsub = None
                try:
                    pubsub = await apubsub(redis)
                    self.confirmed.clear()
                    # Set before the first await, so add() subscribes what this list misses.
                    self._pubsub, self._requested = pubsub, set(self.listeners)
                    await _subscribe(pubsub, self._requested)
                    async for message in pubsub.listen():
                        kind, channel = message["type"], message["channel"]
                        if kind == "message":
                            self._dispatch(channel, message["data"])
                        elif kind == "pmessage":
                            self._dispatch(PATTERN + message["pattern"], message["data"])
                        elif kind in ("subscribe", "psubscribe"):
                            if kind == "psubscribe":
                                channel = PATTERN + channel
                            self._link(True)
                            # Again on a channel already confirmed: redis-py reconnected by itself.
                            again = channel in missed or channel in self.confirmed
                            missed.discard(channel)
                            await self._confirm(channel)
                            if again:  # what was published while disconnected is lost: look again
                                self._dispatch(channel, None)
                            backoff.reset()
                except NETWORK_ERRORS as exc:
                    delay = backoff.next()
                    log.warning("worqr dashboard: pub/sub connection lost (%s); retrying in %.1f s", exc, delay)
                    missed = set(self.listeners)
                    self._link(False)
                    await asyncio.sleep(delay)
                finally:
                    if self._pubsub is pubsub:
                        self._pubsub = None
                    try:
                        if pubsub is not None:
                            await asyncio.shield(pubsub.aclose())
                    except Exception:  # best effort: the connection may already be gone
                        pass
        finally:
            await redis.aclose()
