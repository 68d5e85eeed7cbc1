"""Worker: serves queues in priority order with N slots.

The launcher owns the worker's state and its lifecycle; the duties are in their own pieces:

1. ``heartbeat.Heart`` registers the worker (claiming its name) and beats;
2. ``control.Listener`` listens on the worker's control channel;
3. ``fetch.Fetcher`` fills free slots, acknowledging finished tasks in the same calls;
4. ``processor.start`` runs each delivery; ``reporter.Reporter`` reports outcomes;
   ``scheduler.Scheduler`` syncs the schedules and fires their ticks (every worker takes part);
5. on stop (``request_stop``, SIGTERM/SIGINT), ``shutdown.shutdown``: take no more work, let
   running tasks finish for up to ``grace`` seconds (a second signal ends the grace at once),
   give the rest back to the front of their queues in the order they started (one call per
   queue), deregister.

The helpers (heartbeat, control channel, progress, linker, scheduler) run under
``keep_running``: one that fails on an unexpected error is logged with its traceback and
started again with a backoff, never left dead while the worker goes on.

Deliveries are keyed by (task id, lease): a handler still running after its timeout keeps its
slot, and a later attempt of the same task is a delivery of its own.

Isolated sync handlers (``isolation="process"``) run in ``procpool.ProcessPool``'s processes,
whose fork server is forked in ``run`` before the event loop and the threads start.
"""

import asyncio
import logging
import os
import signal
import socket
import time
from dataclasses import replace
from datetime import UTC, datetime

from .. import keys, tracing
from .. import schedules as schedule_store
from ..backoff import Backoff, wait_event
from ..connection import NETWORK_ERRORS
from ..errors import NoHandler
from ..registry import get_handler, with_isolation
from . import processor, procpool
from .chunks import Chunker
from .control import Listener
from .fetch import Fetcher
from .heartbeat import Heart
from .linker import Linker
from .pool import ThreadPool
from .progress import ProgressSink
from .reporter import Reporter
from .scheduler import Scheduler
from .shutdown import shutdown

log = logging.getLogger("worqr.worker")

#: Seconds a cancel for a task this worker does not know (yet) is kept: a cancel can overtake the
#: reply of the ``start`` call that gave us the task.
EARLY_CANCEL_S = 10.0
#: A helper (heartbeat, control channel, linker, scheduler ...) that failed on an unexpected error
#: is started again after this many seconds, doubling up to HELPER_RESTART_MAX; a helper that ran
#: STABLE_AFTER seconds before failing starts again after HELPER_RESTART.
HELPER_RESTART = 1.0
HELPER_RESTART_MAX = 30.0
STABLE_AFTER = 60.0


def default_name():
    return f"{socket.gethostname()}.{os.getpid()}.{os.urandom(3).hex()}"


class Worker:
    def __init__(
        self,
        queues,
        connection,
        *,
        concurrency=1,
        name=None,
        grace=30.0,
        callback_handler=None,
        schedules=None,
        isolation="thread",
        max_tasks_per_child=None,
        max_memory=None,
        child_init=None,
    ):
        """``callback_handler`` (a HandlerSpec) runs tasks that carry a callback URL; with it, a
        queue without a handler of its own may be served (for such tasks only). ``schedules``
        ([ScheduleSpec]): the settings' schedules, synced to Redis at start (None: left as they are).
        ``isolation`` is where sync handlers that don't choose run ("thread" or "process");
        isolated handlers' processes are recycled after ``max_tasks_per_child`` tasks or past
        ``max_memory`` MB, and each runs ``child_init()`` once before its first task."""
        if not queues:
            raise NoHandler("no queue to serve: give queue names or register handlers")
        self.queues = [keys.check_queue_name(q) for q in queues]
        self.callback_handler = callback_handler
        self.specs = {}
        for q in self.queues:
            spec = get_handler(q)
            if spec is None and callback_handler is None:
                raise NoHandler(f"queue {q!r} has no handler: define one with @handler({q!r})")
            self.specs[q] = with_isolation(spec, isolation) if spec else _no_handler_spec(q, callback_handler)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError("concurrency must be an integer >= 1")
        self.connection, self.config = connection, connection.config
        self.tracing = tracing.enabled(self.config)  # OpenTelemetry run spans (engine.tracing)
        self.concurrency = concurrency
        self.name = keys.check_worker_name(name or default_name())
        self.grace = grace
        self.schedules = schedules
        for spec in schedules or ():  # a run the handler would refuse: refuse to start instead
            schedule_store.check_handler(spec)
        self.procs = procpool.for_worker(
            self.specs,
            concurrency,
            self.config,
            max_tasks=max_tasks_per_child,
            max_memory=max_memory,
            child_init=child_init,
            on_broken=self.fatal,
        )
        self.deliveries = {}  # (id, lease) -> processor.Delivery
        self.chunks = Chunker(self)  # chunk handlers' deliveries, gathered into chunks
        #: (queue, id) -> when: cancels that arrived before the delivery they are for (its start
        #: reply still on its way): applied if it arrives within EARLY_CANCEL_S
        self.early_cancels = {}
        self.stopping = False
        self.registered = False
        self.started_at = datetime.now(UTC).isoformat()
        self.exit_code = 0
        self.error = None

    def spec_for(self, queue, task):
        """The handler of a task: the queue's, or the webhook deliverer for a callback task."""
        return self.callback_handler if task.callback and self.callback_handler else self.specs[queue]

    # -- lifecycle -------------------------------------------------------------------------

    def run(self, after_fork=None):
        """Serve until SIGTERM/SIGINT; returns the exit code (raises what stopped it early).
        ``after_fork`` is called once the fork server of isolated handlers exists, before the
        event loop: where the caller starts threads of its own (the outbox relay), which a fork
        must not copy."""
        if self.procs is not None:
            self.procs.start_server()
        if after_fork is not None:
            after_fork()
        try:
            asyncio.run(self.main())
        finally:
            if self.procs is not None:
                self.procs.close()
        if self.error is not None:
            raise self.error
        return self.exit_code

    def _on_stop_signal(self, sig):
        log.debug("worqr: worker %s: stop signal %s received", self.name, signal.Signals(sig).name)
        self.request_stop()

    def request_stop(self, *_):
        if self.stopping:
            log.warning("worqr: second stop signal: giving running tasks back now")
            self.grace = 0
        self.stopping = True
        self.stop_event.set()
        self.changed.set()

    def fatal(self, exc):
        """Stop because of ``exc`` (e.g. another live worker took our name)."""
        self.error = exc
        self.exit_code = 1
        self.request_stop()

    async def main(self):
        self.loop = asyncio.get_running_loop()
        self.changed, self.stop_event, self.subscribed = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.reporter, self.fetcher, self.heart = Reporter(self), Fetcher(self), Heart(self)
        self.progress = ProgressSink(self)  # task.progress() and task.log() of running handlers
        self.linker = Linker(self)
        self.pool = ThreadPool(self.concurrency)
        self.redis = self.connection.async_client(max_connections=self.concurrency + 8)
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) is signal.SIG_IGN:  # ignored when we started (a supervisor's
                continue  # worker: the supervisor passes a Ctrl-C on): leave it so
            try:
                self.loop.add_signal_handler(sig, self._on_stop_signal, sig)
            except (NotImplementedError, RuntimeError):  # not the main thread (tests)
                pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # a supervisor's worker blocked it till now
        helpers = []
        try:
            if self.procs is not None:
                await self.procs.start()
            await self.heart.register_until_done()
            listener = Listener(self.redis, keys.worker_channel(self.name), self.on_control, self.on_subscribed)
            self.scheduler = Scheduler(self, self.schedules)  # schedules (periodic tasks)
            helpers = [
                asyncio.ensure_future(self.keep_running(what, run))
                for what, run in (
                    ("control channel", listener.run),
                    ("heartbeat", self.heart.run),
                    ("progress reporter", self.progress.run),
                    ("linker", self.linker.run),
                    ("scheduler", self.scheduler.run),
                )
            ]
            log.info("worqr: worker %s serving %s with %d slot(s)", self.name, ", ".join(self.queues), self.concurrency)
            await self.fetcher.run()
            await shutdown(self)
        except Exception as exc:
            self.error = self.error or exc
        finally:
            for h in helpers:
                h.cancel()
            if self.heart.side is not None:  # the heartbeat's side work under way
                self.heart.side.cancel()
                helpers.append(self.heart.side)
            if helpers:  # cancelled helpers end at once; never let one hold the exit up
                await asyncio.wait(helpers, timeout=5.0)
            self.pool.shutdown()
            if self.procs is not None:
                self.procs.close()
            await self.redis.aclose()
        log.info("worqr: worker %s stopped", self.name)

    async def keep_running(self, what, run):
        """Run the helper coroutine ``run()`` until the worker stops. A helper that fails on an
        unexpected error (a network error is each helper's own to retry) is logged with its
        traceback and started again after a backoff (``HELPER_RESTART`` doubling to
        ``HELPER_RESTART_MAX`` seconds; back to the first once it ran ``STABLE_AFTER``)."""
        backoff = Backoff(HELPER_RESTART, HELPER_RESTART_MAX)
        while not self.stopping:
            began = time.monotonic()
            try:
                await run()
                return
            except Exception:
                if self.stopping:
                    return
                if time.monotonic() - began >= STABLE_AFTER:
                    backoff.reset()
                delay = backoff.next()
                log.exception("worqr: worker %s: its %s failed; starting it again in %.1f s", self.name, what, delay)
                await wait_event(self.stop_event, delay)

    # -- state the pieces share ------------------------------------------------------------

    def free_slots(self):
        """Slots not taken: a delivery takes one, a chunk one however many tasks it holds (a
        partial chunk still filling takes none yet: ``chunks.Chunker.want`` fills it)."""
        if not self.registered:
            return 0
        return self.concurrency - (len(self.deliveries) - self.chunks.members) - self.chunks.running

    def start_delivery(self, d):
        if self.early_cancels.pop((d.task.queue, d.task.id), None) is not None:
            d.cancel_locally()  # cancelled before we even knew we had it: it never starts
        self.deliveries[d.key] = d
        if d.spec.chunk:
            self.chunks.add(d)
        else:
            processor.start(self, d)

    def delivery_done(self, d):
        if self.deliveries.pop(d.key, None) is not None and d.spec.chunk:
            self.chunks.ended(d)
        if d.span is not None:  # no outcome was reported: an error in the worker itself
            self.reporter.log_outcome(d, "error", "the worker failed to run the task")
        self.changed.set()

    def cancel_delivery(self, d):
        """Stop a delivery that was cancelled (or taken back): an async handler is cancelled; a
        sync one can't be, so its cancel is reported now and its result discarded (its lock and
        slot stay taken until its thread returns)."""
        if d.reported:
            return
        d.cancel_locally()
        if not d.is_async and d.handle is not None:
            d.reported = True
            self.reporter.done(d, "cancelled", "")

    def registration_done(self):
        self.registered = True
        self.fetcher.registered()
        self.changed.set()

    def lost_registration(self, queues):
        """We were presumed dead in ``queues``: our tasks there went back to the queue and may
        already run elsewhere. Stop them; their leases are void, so Redis refuses their reports."""
        if queues and self.registered:  # (the first to hear of it says so)
            log.warning(
                "worqr: worker %s was presumed dead in %s (reaped); registering again", self.name, ", ".join(queues)
            )
        self.registered = False
        for d in list(self.deliveries.values()):
            if d.task.queue in queues and not d.reported:
                log.warning("worqr: task %s was taken from this worker (presumed dead); stopping it", d.task.id)
                d.cancel_locally()

    async def still_holds(self, task):
        """Whether Redis still has ``task`` active on this worker under the same lease."""
        try:
            lease, state, worker = await self.redis.hmget(keys.task_key(task.queue, task.id), "l", "s", "w")
        except NETWORK_ERRORS:
            return True  # can't tell: run it; the lease still fences its outcome
        return state == b"active" and worker == self.name.encode() and lease is not None and int(lease) == task.lease

    # -- the control channel ---------------------------------------------------------------

    def on_subscribed(self):
        """After every (re)subscribe: take stock (a task handed to us, or a cancel sent, while we
        were not listening would otherwise be missed)."""
        self.fetcher.take_stock_soon()
        self.subscribed.set()
        self.changed.set()

    def on_control(self, data):
        if data.startswith(b"t "):
            self.fetcher.on_handed(data)
            return
        kind, _, rest = data.decode("utf-8", "replace").partition(" ")
        if kind == "w":
            self.fetcher.on_wake(rest)
        elif kind == "d":
            self.changed.set()
        elif kind == "o":
            self.linker.on_outbox(rest)
        elif kind == "c":
            queue, _, rest = rest.partition(" ")
            task_id, _, lease = rest.partition(" ")  # a lease: the heartbeat took it past its deadline
            mine = [d for d in self.deliveries.values() if d.task.id == task_id and d.task.queue == queue]
            for d in mine:
                if not d.reported:
                    log.info("worqr: cancelling task %s of %s", task_id, queue)
                self.cancel_delivery(d)
            if not mine:
                self._remember_early_cancel(queue, task_id)
            if lease.isdigit() and not any(d.key == (task_id, int(lease)) for d in mine):
                # Redis kept its lock and slots for a handler of ours, but we run no such delivery
                # (a lost hand-over, a report given up): release them, or they stay held while we live.
                self.reporter.release_unknown(queue, task_id, int(lease))

    def _remember_early_cancel(self, queue, task_id):
        now = time.monotonic()
        for key, at in list(self.early_cancels.items()):
            if now - at > EARLY_CANCEL_S:
                del self.early_cancels[key]
        if len(self.early_cancels) < 10000:
            self.early_cancels[(queue, task_id)] = now


def _no_handler_spec(queue, callback_handler):
    """The spec of a queue served only for callback tasks: its other tasks fail clearly."""

    def no_handler(task):
        raise NoHandler(f"queue {queue!r} has no handler and task {task.id} has no callback")

    return replace(callback_handler, queue=queue, func=no_handler, is_async=False)
