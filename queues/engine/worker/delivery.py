"""Deliveries: the tasks a worker holds, each one lease of a task, and the one owner of their state.

A delivery's life is one ``State``, changed only through its methods, which refuse a change its
state does not allow (``IllegalTransition``)::

    TAKEN ──launched──> RUNNING ──time_out──> TIMING_OUT ──finish──> DONE
      │                   │                                          ^
      └──────report───────┴──report──> FINISHING ──────finish────────┘
      (TAKEN and RUNNING may also finish at once: never started, or a failure of the worker)

- TAKEN: taken from Redis (or handed over); its handler not started yet (the checks of a worker
  that may have been presumed dead may be under way);
- RUNNING: its handler runs and no outcome was reported;
- TIMING_OUT: its handler ran past its timeout: the timeout reports its failure and ends it
  once the handler has really returned;
- FINISHING: its outcome was reported (or its task given back, or found taken from us): all
  that is left is its handler's end (a cancelled sync handler's thread runs on);
- DONE: over, its slot free.

What Redis keeps for its handler is a ``Hold``, apart: an outcome reported while the handler
still ran keeps the task's lock and its slots under the queue's limits (KEPT) until the handler
returns; then their release is queued, once (RELEASED). A report refused as stale (the task was
taken from us) may have left them kept too, and can come after the end.

``Deliveries`` is the table of what the worker holds: it frees and counts the slots, applies a
cancel that overtook the delivery it is for, and ends deliveries.
"""

import asyncio
import enum
import logging
import time

from .chunks import Part

log = logging.getLogger("worqr.worker")

#: Seconds a cancel for a task this worker does not know (yet) is kept: a cancel can overtake the
#: reply of the ``start`` call that gave us the task.
EARLY_CANCEL_S = 10.0
#: Early cancels kept at most.
EARLY_CANCELS_MAX = 10000


class IllegalTransition(RuntimeError):
    """A delivery was asked to change to a state its state does not allow (a bug of the worker)."""


class State(enum.Enum):
    TAKEN = "taken"
    RUNNING = "running"
    TIMING_OUT = "timing out"
    FINISHING = "finishing"
    DONE = "done"


class Hold(enum.Enum):
    NOTHING = "nothing"  # nothing is kept for its handler (as far as this worker knows)
    KEPT = "kept"  # reported with keep (its handler still ran), or refused as stale
    RELEASED = "released"  # the release of what was kept is queued


#: The changes each state allows.
_ALLOWED = {
    State.TAKEN: {State.RUNNING, State.FINISHING, State.DONE},
    State.RUNNING: {State.TIMING_OUT, State.FINISHING, State.DONE},
    State.TIMING_OUT: {State.DONE},
    State.FINISHING: {State.DONE},
    State.DONE: set(),
}


class Delivery:
    """A task handed to this worker (one lease of it): the task, its handler and its state.
    ``handed``: handed straight to this idle worker by an enqueue (its start goes first);
    ``start_by``: a rate-limited queue's, the ``time.monotonic()`` its handler must start by."""

    __slots__ = (
        "task",
        "spec",
        "started",
        "handed",
        "start_by",
        "state",
        "hold",
        "handle",
        "runner",
        "timer",
        "span",
        "run_trace",
        "chunk",
        "checkpoints",
        "sealed",
    )

    def __init__(self, task, spec, *, handed=False, start_by=None):
        self.task, self.spec = task, spec
        self.handed, self.start_by = handed, start_by
        self.started = time.monotonic()
        self.state = State.TAKEN
        self.hold = Hold.NOTHING
        self.handle = None  # the asyncio task (async handler) or future (sync handler)
        self.runner = None  # the asyncio task of what is awaited for it (checks, a report, a timeout)
        self.timer = None  # its timeout's timer
        self.span = None  # the OpenTelemetry run span of this attempt, until its outcome is reported
        self.run_trace = ""  # then its traceparent, sent with the outcome (links.lua: run_traces)
        self.chunk = None  # a chunk handler's: the chunks.Chunk whose call runs it
        self.checkpoints = None  # a generator handler's run (checkpoints.Run)
        self.sealed = False  # its payload was sealed (an encrypted queue's): its kept result is too

    def __repr__(self):
        return f"<Delivery {self.task.id} lease {self.task.lease} {self.state.value}, {self.hold.value}>"

    @property
    def key(self):
        return (self.task.id, self.task.lease)

    @property
    def is_async(self):
        return self.spec.is_async

    @property
    def isolated(self):
        """Whether its (sync) handler runs in a handler process of its own."""
        return self.spec.isolation == "process"

    @property
    def stoppable(self):
        """Whether its handler can be stopped from outside (async, or isolated)."""
        return self.is_async or self.isolated

    @property
    def reported(self):
        """Whether its outcome is reported (or its task given back), or being reported by its timeout."""
        return self.state in (State.TIMING_OUT, State.FINISHING, State.DONE)

    @property
    def ended(self):
        return self.state is State.DONE

    def still_running(self):
        """Whether the handler was started and has not returned yet."""
        return self.handle is not None and not self.handle.done()

    # -- its state ------------------------------------------------------------------------

    def _move(self, to):
        if to not in _ALLOWED[self.state]:
            raise IllegalTransition(f"task {self.task.id} (lease {self.task.lease}): {self.state.value} -> {to.value}")
        self.state = to

    def launched(self, handle):
        """Its handler started (``handle``: what ends with it)."""
        self._move(State.RUNNING)
        self.handle = handle

    def report(self):
        """Its outcome is reported now (or its task given back, or found taken from us)."""
        self._move(State.FINISHING)

    def time_out(self):
        """Its handler ran past its timeout: the timeout reports it and ends it."""
        self._move(State.TIMING_OUT)

    def finish(self):
        """It is over: its handler has returned (or never started)."""
        self._move(State.DONE)

    # -- what Redis keeps for its handler -------------------------------------------------

    def report_sent(self, keep):
        """An outcome of it goes to Redis with ``keep`` (its handler still runs: its lock and
        slots stay held); returns ``keep``. Decided at each sending: a report sent again after
        the handler returned keeps nothing."""
        if self.hold is not Hold.RELEASED:
            self.hold = Hold.KEPT if keep else Hold.NOTHING
        return keep

    def refused(self):
        """A report of it was refused as stale: whoever took the task may have kept its lock."""
        if self.hold is not Hold.RELEASED:
            self.hold = Hold.KEPT

    def release_due(self):
        """Whether the release of what was kept for it is to be queued now (once: it is over and
        something may be kept); marks it queued."""
        if self.hold is Hold.KEPT and self.state is State.DONE:
            self.hold = Hold.RELEASED
            return True
        return False

    # -- its handler ----------------------------------------------------------------------

    def cancel_locally(self):
        """Ask the handler to stop: cancels an async one, ends an isolated one's process (SIGTERM,
        then SIGKILL after KILL_GRACE), flags a sync one."""
        self.task.set_cancelled()
        if isinstance(self.handle, Part):  # its chunk's call, shared: stopped once every part asks
            self.handle.tell_cancelled()
            self.handle.ask_stop()
        elif self.handle is not None and self.is_async:
            self.handle.cancel()
        elif self.handle is not None and self.isolated:
            self.handle.stop()

    def stop_now(self):
        """The grace is over: cancel an async handler, kill an isolated one's process at once."""
        if isinstance(self.handle, Part):
            self.handle.ask_stop(now=True)
        elif self.handle is not None and self.is_async:
            self.handle.cancel()
        elif self.handle is not None and self.isolated:
            self.handle.stop(now=True)


class Deliveries:
    """The deliveries a worker holds, by (task id, lease): a handler still running after its
    timeout keeps its slot, and a later attempt of the same task is a delivery of its own.
    ``reporter`` reports the cancels it makes; ``status`` tells whether the worker is registered
    (no slot is free while it is not) and hears of every slot freed."""

    def __init__(self, concurrency, status, reporter, chunks=None):
        self.concurrency, self.status, self.reporter = concurrency, status, reporter
        self.chunks = chunks  # chunks.Chunker: a chunk takes one slot however many tasks it holds
        self.held = {}  # (id, lease) -> Delivery
        self._stopping = set()  # the asyncio tasks of _cancel_at_yield under way
        #: (queue, id) -> when: cancels that arrived before the delivery they are for (its start
        #: reply still on its way): applied if it arrives within EARLY_CANCEL_S
        self.early_cancels = {}

    def __len__(self):
        return len(self.held)

    def __bool__(self):
        return bool(self.held)

    def __contains__(self, key):
        return key in self.held

    def get(self, key):
        return self.held.get(key)

    def all(self):
        return list(self.held.values())

    def unreported(self):
        """The deliveries whose outcome is not reported yet, in the order they started."""
        return sorted((d for d in self.held.values() if not d.reported), key=lambda d: d.started)

    def free_slots(self):
        """Slots not taken: a delivery takes one, a chunk one (a partial chunk still filling
        takes none yet: ``chunks.Chunker.want`` fills it)."""
        if not self.status.registered:
            return 0
        taken = len(self.held)
        if self.chunks is not None:
            taken += self.chunks.running - self.chunks.members
        return self.concurrency - taken

    def add(self, d):
        """Hold ``d`` (its handler is started next); one cancelled before we even knew we had it
        never starts."""
        if self.early_cancels.pop((d.task.queue, d.task.id), None) is not None:
            d.cancel_locally()
        self.held[d.key] = d

    def done(self, d):
        """``d`` is over: its slot is free."""
        if self.held.pop(d.key, None) is not None and d.spec.chunk and self.chunks is not None:
            self.chunks.ended(d)
        if d.span is not None:  # no outcome was reported: an error in the worker itself
            self.reporter.log_outcome(d, "error", "the worker failed to run the task")
        self.status.poke()

    def cancel(self, d):
        """Stop a delivery that was cancelled (or taken back): an async handler is cancelled; a
        sync one can't be, so its cancel is reported now and its result discarded (its lock and
        slot stay taken until its thread returns). An async generator handler (checkpoints) stops
        at its next yield, as a sync one does, and is cancelled only if none comes within
        KILL_GRACE (``_cancel_at_yield``)."""
        if d.reported:
            return
        if d.checkpoints is not None and d.is_async and d.still_running():
            d.task.set_cancelled()  # what it looks at, at each yield
            stopping = asyncio.ensure_future(_cancel_at_yield(d))
            self._stopping.add(stopping)
            stopping.add_done_callback(self._stopping.discard)
            return
        d.cancel_locally()
        if not d.is_async and d.handle is not None:
            d.report()
            self.reporter.done(d, "cancelled", "")

    def cancel_task(self, queue, task_id):
        """A cancel of ``task_id`` came: stop the deliveries of it, or remember it for a while if
        there is none yet. Returns those deliveries."""
        mine = [d for d in self.held.values() if d.task.id == task_id and d.task.queue == queue]
        for d in mine:
            if not d.reported:
                log.info("worqr: cancelling task %s of %s", task_id, queue)
            self.cancel(d)
        if not mine:
            self._remember_early_cancel(queue, task_id)
        return mine

    def taken_back(self, queues):
        """We were presumed dead in ``queues``: stop the deliveries of their tasks (their leases
        are void, so Redis refuses their reports)."""
        for d in list(self.held.values()):
            if d.task.queue in queues and not d.reported:
                log.warning("worqr: task %s was taken from this worker (presumed dead); stopping it", d.task.id)
                d.cancel_locally()

    def _remember_early_cancel(self, queue, task_id):
        now = time.monotonic()
        for key, at in list(self.early_cancels.items()):
            if now - at > EARLY_CANCEL_S:
                del self.early_cancels[key]
        if len(self.early_cancels) < EARLY_CANCELS_MAX:
            self.early_cancels[(queue, task_id)] = now


async def _cancel_at_yield(d):
    """Let ``d``'s async generator stop at its next yield (saving its checkpoint there), waiting up
    to KILL_GRACE; then cancel it if it still runs (a step cut short is done again by whoever runs
    the task next, from the checkpoint)."""
    try:
        await d.checkpoints.stop_at_yield()
    except Exception:  # its checkpoint could not be saved: the cancel goes on
        log.exception("worqr: error while stopping task %s at its next yield", d.task.id)
    if d.still_running():
        d.cancel_locally()
