"""Chunks: a chunk handler (``@handler(..., chunk=n, chunk_wait=s)``) runs on a list of tasks.

1. The fetcher asks a chunk queue for up to ``n`` tasks per free slot in one ``start`` call; the
   deliveries gather in the queue's buffer (each keeps its own lease, lock and timeout, and is
   acknowledged or failed on its own).
2. A full buffer runs at once; a partial one runs ``chunk_wait`` seconds after its first task
   came (hand-overs and later fetches fill it meanwhile), or when the worker stops.
3. Tasks cancelled before the call are left out of it (``processor`` reports them cancelled).
   The call's outcome is shared out to one future per task (``Chunk.parts``), which
   ``processor`` reports as it reports any handler's: returned, each completes (or, cancelled
   during the call, is cancelled: its ``task.cancelled`` turns true for the handler, in an
   isolated one's process too); ``ChunkFailed({id: exc})`` fails those and completes the rest;
   anything else raised fails them all. The call's end reports its parts in that same loop
   callback, one after the other (``Part.on_end``): no done callback, and no loop callback, per
   task. A part ended on its own (its task's cancel or timeout) is reported a loop turn later, as
   a done callback would be.
4. A chunk takes one of the worker's slots (and a thread, or a handler process), however many
   tasks it holds; under the queue's limits it counts as its size (every task is started by
   ``start``).
"""

import asyncio
import logging
import math
import time

from ..errors import ChunkFailed
from ..limits import StartedLate
from .contained import contained, settable

log = logging.getLogger("worqr.worker")


class ChunkTasks(list):
    """The tasks of one chunk, as its handler receives them (a list of Task). It stands for them
    where the worker expects one task: ``queue``, ``id`` (in messages), ``set_cancelled``,
    ``attach_sink`` (a handler process's doing)."""

    def __init__(self, tasks):
        super().__init__(tasks)
        self.queue = tasks[0].queue
        self._by_id = None  # id -> task, made at the first report

    @property
    def id(self):
        return f"{self[0].id} (and {len(self) - 1} more of its chunk)" if len(self) > 1 else self[0].id

    def set_cancelled(self):
        for task in self:
            task.set_cancelled()

    def attach_sink(self, sink):
        for task in self:
            task.attach_sink(sink)

    def pass_report(self, task_id=None, **report):
        """A report from the chunk's handler process (its progress or log lines): on the task of
        the chunk it names (the first if it names none of them)."""
        if self._by_id is None:
            self._by_id = {task.id: task for task in self}
        self._by_id.get(task_id, self[0]).pass_report(**report)


class Part(asyncio.Future):
    """One task's share of a chunk's outcome, its delivery's ``handle``. Its task's cancel or
    timeout, or the worker's stop, ask it to stop (``ask_stop``): the chunk's call goes on for
    the others, and the part ends when the call does (its task's lock and slots held till
    then, as for any handler still running); the call is stopped once every part asked.
    ``on_end(d, part)``: what reports its end (``Processor``'s, given by ``report_with`` when it
    launches ``d``; None before)."""

    def __init__(self, chunk, d, *, loop):
        super().__init__(loop=loop)
        self.chunk, self.d, self.on_end = chunk, d, None
        self.stop_asked = False

    def cancel(self, msg=None):
        """Cancelled itself (only the loop's own shutdown does that): it ends now."""
        if not super().cancel(msg):
            return False
        self.get_loop().call_soon(self.chunk.part_done, self)
        return True

    def ask_stop(self, now=False):
        """Its task is to stop: the call is stopped (``now``: an isolated one's process killed at
        once) if every part asked, or has ended."""
        if self.done():
            return
        self.stop_asked = True
        self.chunk.stop_if_all_asked(now)

    def tell_cancelled(self):
        """Its task is cancelled: an isolated chunk's process is told, so that the handler's copy
        of the task says so too (a thread's or a coroutine's is the worker's own)."""
        handle = self.chunk.handle
        if not self.done() and handle is not None and not handle.done() and hasattr(handle, "tell_cancelled"):
            handle.tell_cancelled(self.d.task.id)

    def report_with(self, on_end):
        """Its delivery was launched: ``on_end(d, part)`` reports its end."""
        self.on_end = on_end


class Chunk:
    """One call of a chunk handler: its deliveries, the call's handle, a part per task run."""

    def __init__(self, chunker, deliveries):
        self.chunker = chunker
        self.left = len(deliveries)  # deliveries that have not ended yet
        self.parts = {}
        self.running = 0  # parts not done yet
        self.handle = None

    def part(self, d):
        return self.parts[d.key]

    def start(self, live):
        """Start the handler on the tasks of ``live`` (deliveries not cancelled)."""
        w = self.chunker
        spec, loop = live[0].spec, w.loop
        tasks = ChunkTasks([d.task for d in live])
        for d in live:
            self.parts[d.key] = Part(self, d, loop=loop)
        self.running = len(live)
        start_by = min((d.start_by for d in live if d.start_by is not None), default=None)
        func = (
            spec.func if start_by is None or spec.isolation == "process" else _gated(spec.func, start_by, spec.is_async)
        )
        for task in tasks:
            task.attach_sink(w.progress)
        if spec.is_async:
            self.handle = asyncio.ensure_future(contained(func(tasks)))
        elif spec.isolation == "process":
            self.handle = w.procs.submit(tasks, "", start_by)
        else:
            self.handle = w.pool.submit(loop, func, tasks)
        self.handle.add_done_callback(self._settle)

    def _settle(self, handle):
        """Share the call's outcome out to the parts still waiting for it, and report each."""
        cancelled = handle.cancelled()
        exc = None if cancelled else handle.exception()
        failures = exc.failures if isinstance(exc, ChunkFailed) else None
        if failures is not None:
            ids = {key[0] for key in self.parts}
            unknown = [task_id for task_id in failures if task_id not in ids]
            if unknown:  # a mistake (a payload for an id?): failing none would complete them all
                exc, failures = _not_in_chunk(unknown, len(ids)), None
        for key, part in self.parts.items():
            if part.done():
                continue
            if cancelled:
                asyncio.Future.cancel(part)  # (not Part.cancel: it is reported here, not a turn later)
            elif exc is None or (failures is not None and key[0] not in failures):
                part.set_result(None)
            else:
                part.set_exception(settable(failures[key[0]]) if failures is not None else exc)
            try:
                self.part_done(part)
            except Exception:  # one task's report must not keep the others' from theirs
                log.exception("worqr: error while running task %s", key[0])

    def stop_if_all_asked(self, now=False):
        """Stop the call if every part asked to stop (``Part.ask_stop``) or has ended."""
        if all(p.done() or p.stop_asked for p in self.parts.values()):
            self._stop_call(now)

    def _stop_call(self, now=False):
        """Stop the call, if it can be: an async one is cancelled, an isolated one's process
        ended (a sync one runs on: its tasks see ``task.cancelled``)."""
        handle = self.handle
        if handle is None or handle.done():
            return
        if isinstance(handle, asyncio.Task):
            handle.cancel()
        elif hasattr(handle, "stop"):
            handle.stop(now=now)

    def part_done(self, part):
        """``part`` is done. Once every part has ended, stop the call too. Then report the part,
        if its delivery was launched (else its launch does: ``Processor._go``)."""
        self.running -= 1
        if self.running == 0:
            self._stop_call()
        if part.on_end is not None:
            part.on_end(part.d, part)


def _not_in_chunk(unknown, size):
    """The error every task of a chunk fails with when its ChunkFailed names ids not in it."""
    return ValueError(
        f"ChunkFailed names {len(unknown)} task id(s) not in its chunk of {size} (such as {unknown[0]!r}): "
        "it takes the ids of the tasks that failed (task.id), so every task of the chunk fails"
    )


def _gated(func, start_by, is_async):
    """``func``, which raises ``StartedLate`` instead of running when it starts after ``start_by``."""

    def late(tasks):
        return StartedLate(f"task {tasks.id}: its chunk could not start within the rate's start grace")

    if is_async:

        async def run_async(tasks):
            if time.monotonic() > start_by:
                raise late(tasks)
            return await func(tasks)

        return run_async

    def run(tasks):
        if time.monotonic() > start_by:
            raise late(tasks)
        return func(tasks)

    return run


class Chunker:
    """Gathers a worker's deliveries of chunk queues into chunks and starts them: ``specs`` (the
    queues' handlers), ``loop``, ``pool`` (sync handlers), ``procs`` (isolated ones; None
    without), ``progress`` (the handlers' reports); ``run(d)`` starts a delivery
    (``Processor.start``), ``poke()`` wakes the fetcher."""

    def __init__(self, specs, *, loop, pool, procs, progress, run, poke):
        self.specs, self.loop, self.pool, self.procs, self.progress = specs, loop, pool, procs, progress
        self.run, self.poke = run, poke
        self.buffers = {}  # queue -> [delivery] waiting for their chunk to fill
        self.timers = {}  # queue -> the loop timer that runs its partial chunk
        self.members = 0  # deliveries of chunk queues in the worker's deliveries
        self.running = 0  # chunks started whose deliveries have not all ended

    def want(self, queue, free):
        """How many tasks to ask ``queue`` for, with ``free`` slots left: what fills its partial
        chunk, else a chunk per free slot (at most ``MAX_CHUNK`` tasks in one call)."""
        size = self.specs[queue].chunk
        buffered = len(self.buffers.get(queue, ()))
        if buffered:
            return size - buffered
        if free <= 0:
            return 0
        return size * max(1, min(free, 1000 // size))

    def partials(self, but=None):
        """Partial chunks waiting to fill, of queues other than ``but``: each takes a slot when it
        runs, so the other queues' tasks leave one to it (``Deliveries.free_slots`` counts none)."""
        return sum(1 for queue, buf in self.buffers.items() if buf and queue != but)

    def filling(self, queue):
        """Whether ``queue`` has a partial chunk that a task of it would join."""
        return bool(self.buffers.get(queue))

    def slots_for(self, queue, n):
        """The slots ``n`` more tasks of ``queue`` take (a partial chunk holds one already)."""
        size = self.specs[queue].chunk
        buffered = len(self.buffers.get(queue, ()))
        return math.ceil((buffered + n) / size) - math.ceil(buffered / size)

    def add(self, d):
        """A delivery of a chunk queue: into its queue's buffer, and any full chunk started. A
        partial chunk runs ``chunk_wait`` after its first task came, or sooner for a rate-limited
        queue's: halfway through the start grace left to its earliest task (a chunk that
        started later would only be handed back, and taken again, for ever)."""
        queue, size = d.task.queue, d.spec.chunk
        self.members += 1
        buf = self.buffers.setdefault(queue, [])
        buf.append(d)
        while len(buf) >= size:
            self._start(buf[:size])
            del buf[:size]
        if not buf:
            self._stop_timer(queue)
            return
        due = self.loop.time() + d.spec.chunk_wait
        if d.start_by is not None:
            due = min(due, self.loop.time() + max(0.0, d.start_by - time.monotonic()) / 2)
        timer = self.timers.get(queue)
        if timer is None or due < timer.when():
            if timer is not None:
                timer.cancel()
            self.timers[queue] = self.loop.call_at(due, self._due, queue)

    def _due(self, queue):
        self.timers.pop(queue, None)
        buf = self.buffers.pop(queue, None)
        if buf:
            self._start(buf)

    def _stop_timer(self, queue):
        timer = self.timers.pop(queue, None)
        if timer is not None:
            timer.cancel()

    def start_all(self):
        """Start every partial chunk now (the worker stops: its grace is theirs too)."""
        for queue in list(self.buffers):
            self._stop_timer(queue)
            self._due(queue)

    def _start(self, deliveries):
        chunk = Chunk(self, deliveries)
        self.running += 1
        live = [d for d in deliveries if not d.reported and not d.task.cancelled]
        for d in deliveries:
            d.chunk = chunk
        if live:
            chunk.start(live)
        for d in deliveries:  # a cancelled one is reported cancelled there, never run
            self.run(d)
        self.poke()

    def ended(self, d):
        """A delivery of a chunk queue has ended (``Worker.delivery_done``)."""
        self.members -= 1
        chunk = d.chunk
        if chunk is None:  # never started: the worker is going
            return
        chunk.left -= 1
        if chunk.left == 0:
            self.running -= 1
