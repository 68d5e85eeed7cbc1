"""The pump between Redis pub/sub and one websocket: events mark the view dirty, and at most
every ``min_interval`` seconds a fresh snapshot is read, so a burst of thousands of events a
second becomes a few messages a second. Nothing here runs on a timer: an idle view issues no
Redis command (the one exception is a feed's single trailing ``settle`` refresh after a burst).

Messages sent: ``{"type": "update", "full": bool, "now_ms": int, "sections": {name: html}}``
with the HTML of the page's sections showing a snapshot key that changed since the last
message (every section when ``full``), made by ``render(snapshot, changed keys)``; and
``{"type": "status", "redis": "down" | "up"}`` when the link to Redis drops or comes back.
"""

import asyncio
import json
import logging

from asgiref.sync import sync_to_async

from ..engine.backoff import Backoff
from ..engine.connection import NETWORK_ERRORS, apubsub
from . import feeds

log = logging.getLogger("worqr.dashboard")


class LivePump:
    """Runs ``feed`` against the asyncio Redis client ``redis``, sending dicts with ``send``;
    ``render(snapshot, changed)`` (run in a thread) gives the HTML of the sections to send."""

    def __init__(self, redis, feed, send, render, min_interval=0.4, debounce=0.05):
        self.redis, self.feed, self.send, self.render = redis, feed, send, render
        self.min_interval, self.debounce = min_interval, debounce
        self._dirty = asyncio.Event()
        self._full = True
        self._sent = {}
        self._events = 0
        self._last_event = 0.0
        self.messages = 0

    def mark_dirty(self, full=False, event=False):
        self._full = self._full or full
        if event:
            self._events += 1
            self._last_event = asyncio.get_running_loop().time()
        self._dirty.set()

    async def run(self):
        """Listen and push until cancelled."""
        listener = asyncio.create_task(self._listen())
        try:
            await self._push()
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)

    async def _listen(self):
        backoff, down = Backoff(first=0.1, cap=5.0), False
        while True:
            pubsub = None
            try:
                pubsub = await apubsub(self.redis)
                if self.feed.channels:
                    await pubsub.subscribe(*self.feed.channels)
                if self.feed.patterns:
                    await pubsub.psubscribe(*self.feed.patterns)
                if down:
                    await self.send({"type": "status", "redis": "up"})
                backoff.reset()
                down = False
                self.mark_dirty(full=True)  # the first snapshot, or a resync after a lost link
                expected = len(self.feed.channels) + len(self.feed.patterns)
                async for msg in pubsub.listen():
                    if msg["type"] in ("message", "pmessage"):
                        if self.feed.wants(msg["data"]):
                            self.mark_dirty(event=True)
                    elif msg["type"] in ("subscribe", "psubscribe"):
                        expected -= 1
                        if expected < 0:  # redis-py reconnected and resubscribed: events were lost
                            self.mark_dirty(full=True)
            except NETWORK_ERRORS as exc:
                log.warning("worqr dashboard: event subscription lost (%s); retrying", exc)
                if not down:
                    down = True
                    await self.send({"type": "status", "redis": "down"})
                await backoff.wait()
            finally:
                try:
                    if pubsub is not None:
                        await asyncio.shield(pubsub.aclose())
                except Exception:  # best effort: the connection may already be gone
                    pass

    async def _push(self):
        loop = asyncio.get_running_loop()
        last_sent = -1e9
        settle_at = None
        while True:
            if settle_at is None:
                await self._dirty.wait()
            else:
                try:
                    await asyncio.wait_for(self._dirty.wait(), max(0.0, settle_at - loop.time()))
                except TimeoutError:
                    pass  # the trailing refresh after a burst
                settle_at = None
            await asyncio.sleep(max(self.debounce, last_sent + self.min_interval - loop.time()))
            self._dirty.clear()
            events, self._events = self._events, 0
            full, self._full = self._full, False
            try:
                message = await sync_to_async(self._update, thread_sensitive=False, executor=feeds.EXECUTOR)(full)
            except NETWORK_ERRORS as exc:
                log.warning("worqr dashboard: snapshot failed (%s)", exc)
                self._full = True  # the listener resyncs once Redis is back
                continue
            last_sent = loop.time()
            if message is not None:
                self.messages += 1
                await self.send(message)
            if events and self.feed.settle:
                settle_at = self._last_event + self.feed.settle

    def _update(self, full):
        """(In a thread.) The update for a fresh snapshot, or None when nothing shown changed."""
        snapshot = self.feed.snapshot()
        encoded = {key: json.dumps(value, sort_keys=True) for key, value in snapshot.items()}
        changed = {k for k, v in encoded.items() if full or self._sent.get(k) != v}
        self._sent = encoded
        html = self.render(snapshot, changed)
        if not html and not full:
            return None
        return {"type": "update", "full": full, "now_ms": snapshot.get("now_ms"), "sections": html}
