"""The pump between Redis pub/sub and one websocket: events (heard through the process's
``hub``, one Redis subscriber for every socket of the process) mark the view dirty, and at most
every ``min_interval`` seconds a fresh snapshot is read, so a burst of thousands of events a
second becomes a few messages a second (``MIN_INTERVAL``, longer when a snapshot costs more: ``DUTY``). Nothing here runs on a timer: an idle view issues no
Redis command (the one exception is a feed's single trailing ``settle`` refresh after a burst).

Messages sent: ``{"type": "update", "full": bool, "now_ms": int, "sections": {name: html}}``
with the HTML of the page's sections showing a snapshot key that changed since the last
message (every section when ``full``), made by ``render(snapshot, changed keys)``; and
``{"type": "status", "redis": "down" | "up"}`` when the link to Redis drops or comes back.

No message is longer than ``MAX_MESSAGE_BYTES``: ``encode``, which the socket sends every message
through, splits an update too large for one into several (its sections shared out), and leaves
a section too large alone out, naming it in ``"omitted": {name: bytes}`` (the page keeps what it
shows of it and says it could not be updated). Every section is bounded by what it shows (pages,
caps, previews) far below that; this is the rule that holds whatever a future section shows.
"""

import asyncio
import json
import logging

from asgiref.sync import sync_to_async

from ..engine.connection import NETWORK_ERRORS
from . import feeds
from .hub import get_hub
from .shared import SNAPSHOTS

log = logging.getLogger("worqr.dashboard")

#: Seconds between two snapshots of one view at the least (a burst of events in between is one).
MIN_INTERVAL = 0.12
#: At most this many times the last snapshot's cost between two snapshots' starts (so a view
#: spends at most 1/DUTY of its time refreshing), up to MAX_INTERVAL seconds.
DUTY = 2.0
MAX_INTERVAL = 1.0
#: Seconds the first event after a quiet spell waits for the events that come with it (a task's
#: enqueue, start and end are often a few ms apart).
DEBOUNCE = 0.02
#: The longest message sent, in bytes (of its JSON text, which is ASCII): half of what Daphne
#: sends at most by default (1 MiB; above, it refuses and the socket closes).
MAX_MESSAGE_BYTES = 512 * 1024


def encode(message, limit=MAX_MESSAGE_BYTES):
    """The JSON texts to send for ``message``, each at most ``limit`` bytes (see the module
    docstring): an update's sections are shared out over as few messages as hold them, in their
    order; a section that can't fit in a message of its own is left out, under ``omitted``."""
    text = json.dumps(message)
    if len(text) <= limit or message.get("type") != "update":
        return [text]
    head = {k: v for k, v in message.items() if k != "sections"}
    entries = [(name, html, len(json.dumps({name: html}))) for name, html in message["sections"].items()]
    # Room for the head, and for naming every section as omitted (with 13 digits of size).
    base = len(json.dumps({**head, "sections": {}, "omitted": {name: 10**12 for name, _, _ in entries}}))
    omitted = {name: len(html.encode()) for name, html, cost in entries if base + cost > limit}
    parts, size = [{}], base
    for name, html, cost in entries:
        if name in omitted:
            continue
        if parts[-1] and size + cost > limit:
            parts.append({})
            size = base
        parts[-1][name] = html
        size += cost
    texts = [json.dumps({**head, "sections": part}) for part in parts]
    if omitted:
        log.warning("worqr dashboard: sections too large to send live, left out: %s", omitted)
        texts[0] = json.dumps({**head, "sections": parts[0], "omitted": omitted})
    return texts


class LivePump:
    """Runs ``feed`` against the asyncio Redis client ``redis``, sending dicts with ``send``;
    ``render(snapshot, changed, cache=dict)`` (run in a thread) gives the HTML of the sections
    to send (``cache``: sections already rendered from this snapshot, shared by its sockets)."""

    def __init__(
        self,
        redis,
        feed,
        send,
        render,
        min_interval=MIN_INTERVAL,
        debounce=DEBOUNCE,
        max_interval=MAX_INTERVAL,
        hub=None,
    ):
        self.redis, self.feed, self.send, self.render = redis, feed, send, render
        self.hub = hub
        self._sending = set()
        self.min_interval, self.debounce, self.max_interval = min_interval, debounce, max_interval
        self.interval = min_interval
        self._dirty = asyncio.Event()
        self._full = True
        self._sent = {}
        self._events = 0
        self._last_event = 0.0
        self._since = None  # when the last change not shown yet was heard
        self.messages = 0

    def mark_dirty(self, full=False, event=False):
        self._full = self._full or full
        # The newest change heard, not the first: a snapshot started after the first one heard
        # may have been read before the later ones, whose marks the next push takes too; shown
        # then, the view stayed behind until the next event (seen: 4,985 of a burst's 5,001).
        self._since = asyncio.get_running_loop().time()
        if event:
            self._events += 1
            self._last_event = asyncio.get_running_loop().time()
        self._dirty.set()

    async def run(self):
        """Listen (through the process's hub: one Redis subscriber for all sockets) and push
        until cancelled."""
        hub = self.hub or get_hub()
        hub.watch(self._link)
        added = []
        try:
            for channel in self.feed.channels:
                await hub.add(channel, self._heard)
                added.append((hub.remove, channel))
            for pattern in self.feed.patterns:
                await hub.add_pattern(pattern, self._heard)
                added.append((hub.remove_pattern, pattern))
            self.mark_dirty(full=True)  # the first snapshot
            await self._push()
        finally:
            hub.unwatch(self._link)
            for remove, name in added:
                await asyncio.shield(remove(name, self._heard))

    def _heard(self, data):
        """(On the loop, from the hub.) An event, or None: events may have been missed."""
        if data is None:
            self.mark_dirty(full=True)
        elif self.feed.wants(data):
            self.mark_dirty(event=True)

    def _link(self, up):
        """The hub's link to Redis went down or came back: say so to the page."""
        message = {"type": "status", "redis": "up" if up else "down"}
        task = asyncio.ensure_future(self.send(message))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _push(self):
        loop = asyncio.get_running_loop()
        next_at = -1e9
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
            await asyncio.sleep(max(self.debounce, next_at - loop.time()))
            self._dirty.clear()
            events, self._events = self._events, 0
            full, self._full = self._full, False
            since, self._since = self._since if self._since is not None else loop.time(), None
            started = loop.time()
            try:
                message = await sync_to_async(self._update, thread_sensitive=False, executor=feeds.EXECUTOR)(
                    full, since
                )
            except NETWORK_ERRORS as exc:
                log.warning("worqr dashboard: snapshot failed (%s)", exc)
                self._full = True  # the listener resyncs once Redis is back
                next_at = loop.time() + self.max_interval
                continue
            if message is not None:
                self.messages += 1
                await self.send(message)
            # The next snapshot may start ``interval`` after this one started: at least
            # MIN_INTERVAL, and DUTY times what this one cost (reading, rendering, sending), so a
            # costly page (or a loaded server) slows its own refreshes instead of the server.
            took = loop.time() - started
            self.interval = min(self.max_interval, max(self.min_interval, took * DUTY))
            next_at = started + self.interval
            if events and self.feed.settle:
                settle_at = self._last_event + self.feed.settle

    def _update(self, full, since):
        """(In a thread.) The update for a snapshot started at or after ``since`` (shared with the
        process's other sockets on this view), or None when nothing shown changed."""
        snapshot, encoded, html_cache = SNAPSHOTS.get(self.feed, since)
        changed = {k for k, v in encoded.items() if full or self._sent.get(k) != v}
        self._sent = encoded
        html = self.render(snapshot, changed, cache=html_cache)
        if not html and not full:
            return None
        return {"type": "update", "full": full, "now_ms": snapshot.get("now_ms"), "sections": html}
