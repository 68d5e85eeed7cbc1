"""Worker: serves queues in priority order with N slots.

The launcher makes the worker's pieces, gives each only what it needs, and runs its lifecycle:

1. ``heartbeat.Heart`` registers the worker (claiming its name) and beats; after each beat, the
   periodic duties (``duties``: gone workers, depth samples, the queue and outbox sweeps);
2. ``control.Listener`` listens on the worker's control channel (``on_control`` routes what it
   hears);
3. ``fetch.Fetcher`` fills free slots, acknowledging finished tasks in the same calls; what it
   takes is held in ``delivery.Deliveries`` (the one owner of a delivery's state);
4. ``processor.Processor`` runs each delivery; ``reporter.Reporter`` reports outcomes;
   ``scheduler.Scheduler`` syncs the schedules and fires their ticks (every worker takes part);
5. on stop (``request_stop``, SIGTERM/SIGINT), ``shutdown.shutdown``: take no more work, let
   running tasks finish for up to ``grace`` seconds (a second signal ends the grace at once),
   give the rest back to the front of their queues in the order they started (one call per
   queue), deregister.

The pieces share the ``Capsule`` (what the worker serves and how) and the ``Status`` (stopping,
registered, the events they wait on); none holds the worker itself.

The helpers (heartbeat, control channel, progress, linker, scheduler) run under
``keep_running``: one that fails on an unexpected error is logged with its traceback and
started again with a backoff, never left dead while the worker goes on.

Isolated sync handlers (``isolation="process"``) run in ``procpool.ProcessPool``'s processes,
whose fork server is forked in ``run`` before the event loop and the threads start.
"""

import asyncio
import gc
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
from ..errors import NoHandler
from ..registry import get_handler, with_isolation
from . import checkpoints, procpool
from .capsule import Capsule, Status
from .chunks import Chunker
from .control import Listener
from .delivery import Deliveries
from .duties import Duties
from .duties.depth import DepthSampler
from .duties.gone import GoneWorkers
from .duties.history import HistoryPruning
from .duties.master import MasterCheck
from .duties.outbox import OutboxSweep
from .duties.sweep import QueueSweep
from .fetch import Fetcher
from .heartbeat import Heart
from .linker import Linker
from .pool import ThreadPool
from .processor import Processor
from .progress import ProgressSink
from .reporter import Reporter
from .scheduler import Scheduler
from .shutdown import shutdown

log = logging.getLogger("worqr.worker")

#: A helper (heartbeat, control channel, linker, scheduler ...) that failed on an unexpected error
#: is started again after this many seconds, doubling up to HELPER_RESTART_MAX; a helper that ran
#: STABLE_AFTER seconds before failing starts again after HELPER_RESTART.
HELPER_RESTART = 1.0
HELPER_RESTART_MAX = 30.0
STABLE_AFTER = 60.0
#: How long a stopping worker waits for its cancelled helpers to end (then it exits anyway and
#: logs the ones still running: a cancel one of them swallowed)
HELPERS_END = 5.0
#: The cycle collector's youngest-generation threshold while a worker serves (CPython's is 700):
#: a busy worker makes several container objects per task, nearly all freed at once by reference
#: counting, and a collection every 700 of them cost a tenth of a chunk drain's worker time.
GC_THRESHOLD = 50_000


def _tune_gc():
    """Before serving: the objects made so far (Django, the handlers' modules) are never scanned
    again (``gc.freeze``: fewer full collections, and forked workers share those pages), and the
    youngest generation is collected every ``GC_THRESHOLD`` allocations (a threshold set higher by
    the program itself is kept; a disabled collector stays disabled)."""
    if not gc.isenabled():
        return
    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, GC_THRESHOLD), gen1, gen2)


def _run_abandoning(main):
    """Run ``main`` in a new event loop as ``asyncio.run`` does (the tasks left are cancelled and
    waited for, async generators and the default executor shut down), except that a task left
    that does not end within a second of its cancel is abandoned: ``main`` already waited for
    its helpers and named the ones that outlived their cancel, and ``asyncio.run`` would wait for
    such a task for ever."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=1.0))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()  # abandoned: never run again, the loop closes
        asyncio.set_event_loop(None)
        loop.close()


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
        self.started_at = datetime.now(UTC).isoformat()
        self.capsule = Capsule(
            self.name, self.queues, self.specs, concurrency, self.config, self.started_at, callback_handler
        )
        self.status = Status(grace)
        self.exit_code = 0
        self.error = None

    @property
    def stopping(self):
        return self.status.stopping

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
        _tune_gc()
        try:
            _run_abandoning(self.main())
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
        """Stop: take no more work; asked again, give running tasks back now."""
        self.status.stop()

    def fatal(self, exc):
        """Stop because of ``exc`` (e.g. another live worker took our name)."""
        self.error = exc
        self.exit_code = 1
        self.request_stop()

    def _assemble(self):
        """Make the pieces, each given only its collaborators."""
        cap, status, c = self.capsule, self.status, self.config
        self.redis = redis = self.connection.async_client(max_connections=self.concurrency + 8)
        self.reporter = Reporter(cap.name, c, redis, status.poke)
        self.progress = ProgressSink(self.loop, redis)  # task.progress() and task.log() of running handlers
        self.pool = ThreadPool(cap.concurrency)
        self.chunks = Chunker(  # chunk handlers' deliveries, gathered into chunks
            cap.specs,
            loop=self.loop,
            pool=self.pool,
            procs=self.procs,
            progress=self.progress,
            run=self._run_one,
            poke=status.poke,
        )
        self.deliveries = Deliveries(cap.concurrency, status, self.reporter, self.chunks)
        self.linker = Linker(self.connection, c.heartbeat_interval)
        self.gone = GoneWorkers(self.connection)
        self.duties = Duties(
            [
                self.gone,
                DepthSampler(redis, self.connection, cap.queues),
                QueueSweep(cap.name, c, self.connection),
                MasterCheck(redis, c),
                OutboxSweep(self.connection, cap.queues),
                HistoryPruning(self.connection, c, cap.queues),
            ]
        )
        self.heart = Heart(
            cap,
            self.connection,
            redis,
            status,
            duties=self.duties,
            gone=self.gone,
            counts=self._counts,
            on_registered=self.registration_done,
            on_lost=self.lost_registration,
            fatal=self.fatal,
        )
        self.processor = Processor(
            cap.name,
            tracing=self.tracing,
            loop=self.loop,
            pool=self.pool,
            procs=self.procs,
            reporter=self.reporter,
            progress=self.progress,
            redis=redis,
            unresponsive=self.heart.unresponsive,
            on_done=self.deliveries.done,
            config=c,
            checkpoints=checkpoints.Context(self.loop, redis, status, self.config.kill_grace),
        )
        self.fetcher = Fetcher(
            cap,
            status,
            self.deliveries,
            self.reporter,
            redis,
            chunks=self.chunks,
            run=self._run,
            beat_soon=self.heart.beat_soon,
            on_lost=self.lost_registration,
        )
        self.scheduler = Scheduler(  # schedules (periodic tasks)
            redis,
            self.connection,
            status,
            keep_running=self.keep_running,
            fatal=self.fatal,
            specs=self.schedules,
        )

    def _run(self, d):
        """Run a delivery the fetcher took: a chunk handler's joins its chunk."""
        if d.spec.chunk:
            self.chunks.add(d)
        else:
            self.processor.start(d)

    def _run_one(self, d):
        self.processor.start(d)

    def _counts(self):
        """Tasks processed, failed and active, for the heartbeat's record."""
        return {"processed": self.reporter.processed, "failed": self.reporter.failed, "active": len(self.deliveries)}

    async def main(self):
        self.loop = asyncio.get_running_loop()
        self._assemble()
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
            helpers = [
                asyncio.get_running_loop().create_task(self.keep_running(what, run), name=what)
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
            self.chunks.start_all()  # partial chunks run now, within the grace
            await shutdown(
                self.capsule, self.status, self.deliveries, self.reporter, self.progress, self.heart, self.redis
            )
        except Exception as exc:
            self.error = self.error or exc
        finally:
            for h in helpers:
                h.cancel()
            duties = self.duties.cancel()  # the heartbeat's duties under way
            if duties is not None:
                helpers.append(duties)
            if helpers:  # cancelled helpers end at once; never let one hold the exit up
                _, late = await asyncio.wait(helpers, timeout=HELPERS_END)
                if late:
                    log.warning(
                        "worqr: worker %s: %s did not end within %.0f s of its cancel",
                        self.name,
                        ", ".join(sorted(t.get_name() for t in late)),
                        HELPERS_END,
                    )
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
                await wait_event(self.status.stopped, delay)

    # -- what the heart tells ------------------------------------------------------------

    def registration_done(self):
        self.status.set_registered(True)
        self.fetcher.registered()
        self.status.poke()

    def lost_registration(self, queues):
        """We were presumed dead in ``queues``: our tasks there went back to the queue and may
        already run elsewhere. Stop them; their leases are void, so Redis refuses their reports."""
        if queues and self.status.registered:  # (the first to hear of it says so)
            log.warning(
                "worqr: worker %s was presumed dead in %s (reaped); registering again", self.name, ", ".join(queues)
            )
        self.status.set_registered(False)
        self.deliveries.taken_back(queues)

    # -- the control channel ---------------------------------------------------------------

    def on_subscribed(self):
        """After every (re)subscribe: take stock (a task handed to us, or a cancel sent, while we
        were not listening would otherwise be missed)."""
        self.fetcher.take_stock_soon()
        self.status.subscribed.set()
        self.status.poke()

    def on_control(self, data):
        if data.startswith(b"t "):
            self.fetcher.on_handed(data)
            return
        kind, _, rest = data.decode("utf-8", "replace").partition(" ")
        if kind == "w":
            self.fetcher.on_wake(rest)
        elif kind == "d":
            self.status.poke()
        elif kind == "q":  # quiet (the dashboard's Quiet): take no more tasks, finish those running
            if self.status.go_quiet():
                log.info("worqr: worker %s told to go quiet: taking no more tasks", self.name)
                asyncio.ensure_future(self.fetcher.leave_idle_sets())
                self.heart.beat_soon()  # the workers page shows it at once
        elif kind == "s":  # stop (the dashboard's Stop): as SIGTERM, running tasks finish first
            if not self.stopping:  # (told twice, it is not a second SIGTERM: the grace stays)
                log.info("worqr: worker %s told to stop", self.name)
                self.request_stop()
        elif kind == "o":
            self.linker.on_outbox(rest)
        elif kind == "c":
            queue, _, rest = rest.partition(" ")
            task_id, _, lease = rest.partition(" ")  # a lease: the heartbeat took it past its deadline
            mine = self.deliveries.cancel_task(queue, task_id)
            if lease.isdigit() and not any(d.key == (task_id, int(lease)) for d in mine):
                # Redis kept its lock and slots for a handler of ours, but we run no such delivery
                # (a lost hand-over, a report given up): release them, or they stay held while we live.
                self.reporter.release_unknown(queue, task_id, int(lease))


def _no_handler_spec(queue, callback_handler):
    """The spec of a queue served only for callback tasks: its other tasks fail clearly."""

    def no_handler(task):
        raise NoHandler(f"queue {queue!r} has no handler and task {task.id} has no callback")

    return replace(callback_handler, queue=queue, func=no_handler, is_async=False)
