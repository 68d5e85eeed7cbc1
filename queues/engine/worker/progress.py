"""Progress: carries what handlers report (``task.progress``, ``task.log``) to Redis.

1. ``put`` may be called from any thread (a sync handler's pool thread, the event loop for an
   async handler, or the loop again for an isolated handler's reports, which its process sends
   up its socket as ``("report", ...)`` frames): it only adds to a buffer and, if the buffer was
   empty, wakes the flusher.
2. The flusher sends everything buffered in one ``progress`` script call per queue (only the
   latest progress of a task, all its lines), then waits ``INTERVAL`` so a chatty handler costs
   Redis a few calls a second, not one per line.
3. Before a delivery's outcome is reported, its buffered reports are flushed first
   (``flush_task``), so the lines a handler logged just before it failed stay with the failed
   task; reports of it that the flusher is sending at that moment are waited for first (their
   call and the outcome's go on different connections, and the outcome's could land first:
   the lines were then refused). Reports that arrive after the task is no longer active are
   refused by the script.
"""

import asyncio
import logging
import threading

from .. import commands, keys
from ..backoff import wait_event
from ..connection import NETWORK_ERRORS, raise_if_cancelling

log = logging.getLogger("worqr.worker")

#: Seconds between two flushes (reports made meanwhile go together).
INTERVAL = 0.1


class _Pending:
    __slots__ = ("queue", "lease", "fraction", "message", "lines")

    def __init__(self, queue, lease):
        self.queue, self.lease = queue, lease
        self.fraction, self.message, self.lines = None, "", []


class ProgressSink:
    def __init__(self, loop, redis):
        """Buffers reports from any thread; sends them on ``redis`` from ``loop``."""
        self.loop, self.redis = loop, redis
        self.lock = threading.Lock()
        self.buffer = {}  # (id, lease) -> _Pending
        self.sending = {}  # (id, lease) -> future done once the call carrying its reports returned
        self.wanted = asyncio.Event()
        self.sent = 0  # reports sent (for tests and stats)

    def put(self, task, fraction=None, message=None, lines=None):
        """Buffer a report of ``task`` (thread-safe, never blocks on Redis)."""
        with self.lock:
            was_empty = not self.buffer
            entry = self.buffer.get((task.id, task.lease))
            if entry is None:
                entry = self.buffer[(task.id, task.lease)] = _Pending(task.queue, task.lease)
            if fraction is not None:
                entry.fraction, entry.message = fraction, message or ""
            if lines:
                entry.lines += lines
                del entry.lines[: -keys.TASK_LOG_MAX]
        if was_empty:
            try:
                self.loop.call_soon_threadsafe(self.wanted.set)
            except RuntimeError:  # the loop is closed: the worker is gone
                pass

    def pending(self, task):
        """Whether reports of ``task`` (this delivery of it) are buffered or on their way: its
        outcome, reported now, waits for them (``flush_task``)."""
        key = (task.id, task.lease)
        return key in self.buffer or key in self.sending

    def _take(self, only=None):
        with self.lock:
            if only is None:
                taken, self.buffer = self.buffer, {}
            else:
                taken = {only: self.buffer.pop(only)} if only in self.buffer else {}
        by_queue = {}
        for (task_id, lease), e in taken.items():
            by_queue.setdefault(e.queue, []).append((task_id, lease, e.fraction, e.message, e.lines))
        # on their way from now (before any await): one future per queue's call
        calls = []
        for queue, reports in by_queue.items():
            done = self.loop.create_future()
            for task_id, lease, *_ in reports:
                self.sending[(task_id, lease)] = done
            calls.append((queue, reports, done))
        return calls

    async def _send(self, calls):
        try:
            for queue, reports, done in calls:
                try:
                    await commands.progress(queue, reports).arun(self.redis)
                    self.sent += len(reports)
                except NETWORK_ERRORS as exc:  # progress is best effort: never hold a task up for it
                    raise_if_cancelling()
                    log.warning("worqr: could not record progress of %d task(s) of %s: %s", len(reports), queue, exc)
                self._returned(reports, done)
        finally:  # cancelled midway (the worker exits): the calls not made let their tasks go too
            for _, reports, done in calls:
                if not done.done():
                    self._returned(reports, done)

    def _returned(self, reports, done):
        """The call carrying ``reports`` returned: their tasks' outcomes may go."""
        for task_id, lease, *_ in reports:
            if self.sending.get((task_id, lease)) is done:
                del self.sending[(task_id, lease)]
        done.set_result(None)

    async def flush_task(self, task):
        """Send what ``task`` (this delivery of it) reported, after what of it is on its way."""
        key = (task.id, task.lease)
        while (on_its_way := self.sending.get(key)) is not None:
            await asyncio.shield(on_its_way)
        await self._send(self._take(key))

    async def flush(self):
        await self._send(self._take())

    async def run(self):
        while True:
            await wait_event(self.wanted)
            self.wanted.clear()
            await self.flush()
            await asyncio.sleep(INTERVAL)
