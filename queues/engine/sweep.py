"""The queue sweep, a periodic duty of the workers: one worker at a time (the holder of
``keys.SWEEPER``, a lease) goes through every known queue, ``CHUNK`` queues per heartbeat, and

1. sums their counts and their last hour's throughput: at the end of each pass the sums go to
   ``keys.SUMMARY`` (``readmodel.summary``): the overview's totals and chart when there are too
   many queues to sum at each refresh;
2. forgets the queues left idle: a queue found empty (no task in any state; ``forget`` also
   wants no worker, no pause, no limits, no schedule) is noted in ``keys.QUEUES_IDLE`` with when
   and its ``enqueued`` counter; found so again ``QUEUE_FORGET_AFTER`` later with nothing
   enqueued since, it is taken off the known queues and its keys are deleted (``forget``: the
   script checks it all again, atomically, and the queue goes back on the list if it is kept).
   Forgotten, a queue no longer counts under ``MAX_QUEUES``; an enqueue makes it again.

A pass starts at most every ``EVERY`` seconds. Best effort: a step that fails is tried again
at the next beat (the heartbeat logs it); a sweeper that stops is replaced once its lease ends.
"""

import json
import time

from . import commands, keys, readmodel

#: Queues read per step (one step per heartbeat, on a thread of the worker: three round trips,
#: about 60 ms at 1,000 queues), and seconds between the starts of two passes.
CHUNK = 1000
EVERY = 60.0
#: How long the sweeper's lease lasts without a step (ms): a few beats, so that another worker
#: takes over soon after the sweeper stops.
LEASE_MS = 10_000
#: The counts of a queue that hold tasks: all zero, the queue is empty.
_HOLDING = ("pending", "delayed", "active", "failed", "blocked", "waiting")


def forget(client, name, enqueued):
    """Forget queue ``name`` if it is still empty and idle with ``enqueued`` tasks ever enqueued
    (``commands.forget``); True if it was. Off the known queues first, so that an enqueue that
    comes meanwhile either finds its keys (and the script keeps the queue) or makes it anew,
    counted under MAX_QUEUES."""
    client.srem(keys.KNOWN_QUEUES, name)
    gone = False
    try:
        gone = commands.forget(name, enqueued).run(client)
    finally:
        if not gone:
            client.sadd(keys.KNOWN_QUEUES, name)
    client.hdel(keys.QUEUES_IDLE, name)
    return gone


class Sweep:
    """The sweep as one worker runs it: ``step(client)`` at each heartbeat (see the module doc).
    ``clock``: Redis's time in ms by default (the tests give their own)."""

    def __init__(self, name, config, clock=None):
        self.name, self.config = name, config
        self.clock = clock or readmodel.server_ms
        self.names = None  # the queues of the pass under way (None: none)
        self.done = 0
        self.next_try = 0.0  # time.monotonic() before which no pass starts
        self.started_ms = 0
        self.sums = {}
        self.chart = None

    def step(self, client):
        """One step of the sweep (a pass starts if it is time and the lease is free); returns the
        queues it looked at."""
        if self.names is None and time.monotonic() < self.next_try:
            return 0
        if not self._lease(client):
            self.names, self.next_try = None, time.monotonic() + LEASE_MS / 1000
            return 0
        if self.names is None:
            self.names, self.done, self.sums, self.chart = readmodel.known_queues(client), 0, {}, None
            self.started_ms = self.clock(client)
        chunk = self.names[self.done : self.done + CHUNK]
        counts = readmodel.counts_of(client, chunk)
        self._add(counts, readmodel.throughput(client, chunk, now_ms=self.started_ms))
        if self.config.queue_forget_after:
            self._forget_idle(client, chunk, counts)
        self.done += len(chunk)
        if self.done >= len(self.names):
            self._finish(client)
        return len(chunk)

    def _lease(self, client):
        """Take the sweeper's lease, or keep it if this worker holds it; False if another does."""
        holder = client.get(keys.SWEEPER)
        if holder is None:
            return bool(client.set(keys.SWEEPER, self.name, nx=True, px=LEASE_MS))
        if holder == self.name.encode():
            client.pexpire(keys.SWEEPER, LEASE_MS)
            return True
        return False

    def _add(self, counts, chart):
        for c in counts:
            for k, v in c.items():
                self.sums[k] = self.sums.get(k, 0) + int(v)  # paused (a bool) counts the paused queues
        if self.chart is None:
            self.chart = chart
        else:
            for kind in ("completed", "failed"):
                self.chart[kind] = [a + b for a, b in zip(self.chart[kind], chart[kind])]

    def _finish(self, client):
        summary = {
            "at": self.started_ms,
            "queues": len(self.names),
            "took_ms": self.clock(client) - self.started_ms,
            "totals": self.sums,
            "throughput": self.chart or readmodel.throughput(client, [], now_ms=self.started_ms),
        }
        client.set(keys.SUMMARY, json.dumps(summary))
        self.names, self.next_try = None, time.monotonic() + EVERY

    def _forget_idle(self, client, names, counts):
        """Note the empty queues of ``names``; forget those found empty long enough with nothing
        enqueued since (module doc)."""
        if not names:
            return
        now = self.clock(client)
        after_ms = self.config.queue_forget_after * 1000
        idle, due = {}, []
        for name, c, seen in zip(names, counts, client.hmget(keys.QUEUES_IDLE, names)):
            if c["paused"] or any(c[k] for k in _HOLDING):
                if seen is not None:
                    idle[name] = None
                continue
            since, _, enqueued = (seen or b"").decode().partition(":")
            if seen is None or enqueued != str(c["enqueued"]):
                idle[name] = f"{now}:{c['enqueued']}"
            elif now - int(since) >= after_ms:
                due.append((name, c["enqueued"]))
        p = client.pipeline(transaction=False)
        for name, value in idle.items():
            if value is None:
                p.hdel(keys.QUEUES_IDLE, name)
            else:
                p.hset(keys.QUEUES_IDLE, name, value)
        p.execute()
        for name, enqueued in due:
            if not forget(client, name, enqueued):  # in use (a worker, a limit...): wait again
                client.hset(keys.QUEUES_IDLE, name, f"{now}:{enqueued}")
