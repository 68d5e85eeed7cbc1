"""One snapshot for every socket of a process showing the same view.

Sockets on the same page (same view, same arguments) would each read the same snapshot from
Redis after the same event. ``SNAPSHOTS.get(feed, since)`` returns the newest snapshot of the
feed's view if it was started at or after ``since`` (the time the socket heard the last event
it has not shown yet: a snapshot started later includes every one), else reads a new one; readers of
the same view wait for each other, so a burst heard by 200 sockets costs Redis one read.
Rendered sections are kept with the snapshot (``html``), per section and set of permitted
actions, so they are rendered once too. Times are ``time.monotonic()`` (the event loop's clock).
"""

import json
import threading
import time

#: Entries not used for this many seconds are dropped (when there are many).
IDLE_FOR = 30.0
#: Views kept before idle ones are dropped.
KEEP = 256


class Entry:
    __slots__ = ("lock", "started", "snapshot", "encoded", "html", "used")

    def __init__(self):
        self.lock = threading.Lock()
        self.started = None
        self.snapshot = self.encoded = None
        self.html = {}
        self.used = time.monotonic()


class Snapshots:
    def __init__(self):
        self._lock = threading.Lock()
        self._entries = {}
        #: Snapshots read from Redis (for the tests and the curious).
        self.taken = 0

    def get(self, feed, since):
        """(snapshot, {key: json}, html cache) of ``feed``'s view, started at or after ``since``."""
        key = feed.key
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                if len(self._entries) >= KEEP:
                    self._sweep(now)
                entry = self._entries[key] = Entry()
            entry.used = now
        with entry.lock:
            if entry.started is None or entry.started < since:
                started = time.monotonic()
                snapshot = feed.snapshot()
                encoded = {k: json.dumps(v, sort_keys=True) for k, v in snapshot.items()}
                entry.started, entry.snapshot, entry.encoded, entry.html = started, snapshot, encoded, {}
                self.taken += 1
            return entry.snapshot, entry.encoded, entry.html

    def _sweep(self, now):
        for key in [k for k, e in self._entries.items() if now - e.used > IDLE_FOR]:
            del self._entries[key]


SNAPSHOTS = Snapshots()
