"""Runs one delivery and reports its outcome.

1. Don't start it if it was cancelled (or given back) before it could start, or if this worker
   was unresponsive long enough to be presumed dead and no longer holds it. A rate-limited
   queue's handler starts only within the rate's start grace of the ``start`` call that took it
   (``start_by``, checked where it starts: on its thread, in its coroutine, in its process);
   later, it is not run and its task goes back first in line, its start not counted (so no
   window of the handlers' clock sees more starts than the rate: ``limits.START_GRACE_FRACTION``).
2. Start the handler: an ``async def`` one as an asyncio task, a sync one on a pool thread or,
   isolated, in a handler process (``procpool``).
3. Wait for it, for at most the task's timeout.
4. Report exactly one outcome, unless one was already reported (a cancel of a sync handler is
   reported at once; the thread's eventual result is then discarded):
   - returned: completed (acknowledged in batches by the fetcher);
   - raised RetryLater: deferred without using an attempt;
   - raised anything else: a failed attempt (retried with backoff, or failed for good);
   - timed out: cancelled like a user cancel, and reported as a failed attempt at once;
   - cancelled by a user: finished as cancelled.
5. A delivery whose outcome was reported while its handler still ran keeps its lock, its
   worker slot and its slots under the queue's and partition's concurrency until the handler
   really returns; then the lock and those slots are released (``Reporter.release_if_due``).
   An isolated handler is stopped for real: its process is ended, and its handle completes only
   once the process is gone.
"""

import asyncio
import functools
import logging
import time
import traceback as tb_module

from .. import crypto, tracing
from ..errors import RateLimited, RetryLater
from ..limits import StartedLate
from .procpool import HandlerFailed

log = logging.getLogger("worqr.worker")


class Delivery:
    """A task handed to this worker (one lease of it): the task, its handler and its run state."""

    __slots__ = (
        "task",
        "spec",
        "started",
        "handle",
        "reported",
        "runner",
        "keep_lock",
        "stale",
        "ended",
        "released",
        "span",
        "run_trace",
        "handed",
        "timer",
        "timing_out",
        "start_by",
    )

    def __init__(self, task, spec):
        self.task, self.spec = task, spec
        self.started = time.monotonic()
        self.handle = None  # the asyncio task (async handler) or future (sync handler)
        self.reported = False  # an outcome was reported (or the task given back)
        self.runner = None  # the asyncio task of what is awaited for it (checks, a report, a timeout)
        self.keep_lock = False  # its outcome was reported while the handler still ran
        self.stale = False  # a report was refused: the task was taken from us (and maybe its lock kept)
        self.ended = False  # over: the handler has returned (or never started)
        self.released = False
        self.span = None  # the OpenTelemetry run span of this attempt, until its outcome is reported
        self.run_trace = ""  # then its traceparent, sent with the outcome (links.lua: run_traces)
        self.handed = False  # handed straight to this idle worker by an enqueue
        self.timer = None  # its timeout's timer
        self.timing_out = False  # its timeout fired: ``_time_out`` reports it and ends it
        self.start_by = None  # a rate-limited queue's: the time.monotonic() its handler must start by

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

    def still_running(self):
        """Whether the handler was started and has not returned yet."""
        return self.handle is not None and not self.handle.done()

    def cancel_locally(self):
        """Ask the handler to stop: cancels an async one, ends an isolated one's process (SIGTERM,
        then SIGKILL after KILL_GRACE), flags a sync one."""
        self.task.set_cancelled()
        if self.handle is not None and self.is_async:
            self.handle.cancel()
        elif self.handle is not None and self.isolated:
            self.handle.stop()

    def stop_now(self):
        """The grace is over: cancel an async handler, kill an isolated one's process at once."""
        if self.handle is not None and self.is_async:
            self.handle.cancel()
        elif self.handle is not None and self.isolated:
            self.handle.stop(now=True)


def _describe(exc):
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:2000]


def _result_of(spec, value):
    if not spec.keep_result or value is None:
        return ""
    return value if isinstance(value, (str, bytes)) else str(value)


def start(worker, d):
    """Start delivery ``d`` on ``worker`` (a launcher.Worker): its handler starts here, a loop
    timer stands for its timeout, and a callback on its end reports the outcome. No asyncio task
    of the delivery's own (a sixth of a worker's time per task with a no-op handler went to
    starting and resuming one): a task only for what must be awaited, the checks of a worker
    that may have been presumed dead (``_checked``), a failure's report or a log to send first
    (``_end``), a timeout (``_time_out``)."""
    if worker.heart.unresponsive():
        d.runner = worker.loop.create_task(_checked(worker, d))
    else:
        _go(worker, d)


async def _checked(worker, d):
    """Start ``d`` if this worker still holds it."""
    try:
        held = await worker.still_holds(d.task)
    except Exception:
        log.exception("worqr: error while running task %s", d.task.id)
        held = True  # can't tell: run it; the lease still fences its outcome
    if held:
        _go(worker, d)
        return
    # We may have been frozen (or cut off) long enough to be presumed dead: the task was handed
    # to us before that and has since been taken back. Don't run it twice.
    log.warning("worqr: task %s was taken back while this worker was unresponsive; not running it", d.task.id)
    d.reported = True
    _finish(worker, d)


def _go(worker, d):
    task = d.task
    try:
        if d.reported or task.cancelled:  # cancelled (or given back) before it could start
            if not d.reported:
                d.reported = True
                worker.reporter.done(d, "cancelled", "")
            _finish(worker, d)
            return
        _launch(worker, d)
        if task.timeout and task.timeout > 0:
            d.timer = worker.loop.call_later(task.timeout, _timed_out, worker, d)
        d.handle.add_done_callback(functools.partial(_handle_ended, worker, d))
    except Exception:  # a bug here must not kill the worker; the task is recovered by lease
        log.exception("worqr: error while running task %s", task.id)
        _finish(worker, d)


def _handle_ended(worker, d, handle):
    """The handler ended: report it now if that needs no await, else in a task (``_end``). One
    whose timeout fired is ``_time_out``'s to end."""
    if d.timer is not None:
        d.timer.cancel()
    if d.timing_out:
        return
    try:
        if worker.progress.buffer or not _report_now(worker, d):  # its log goes before its outcome
            d.runner = worker.loop.create_task(_end(worker, d))
            return
    except Exception:
        log.exception("worqr: error while running task %s", d.task.id)
    _finish(worker, d)


def _timed_out(worker, d):
    """The handler ran past its timeout (unless it ended in the same loop turn: then its end
    callback reports it as it ended)."""
    if d.handle.done():
        return
    d.timing_out = True
    d.runner = worker.loop.create_task(_time_out(worker, d))


async def _time_out(worker, d):
    """Stop the handler (an async one is cancelled, an isolated one's process ended, a sync one
    asked through ``task.cancelled``), report a failed attempt at once, and end the delivery
    only once the handler has really returned (the slot, and a lock, stay taken until then)."""
    try:
        d.cancel_locally()
        if not d.reported:
            d.reported = True
            if worker.progress.buffer:
                await worker.progress.flush_task(d.task)
            await worker.reporter.failure(d, f"TaskTimeout: ran longer than its timeout of {d.task.timeout:g} s", "")
        await _ended(d.handle)
    except Exception:
        log.exception("worqr: error while running task %s", d.task.id)
    finally:
        _finish(worker, d)


async def _end(worker, d):
    try:
        if worker.progress.buffer:
            await worker.progress.flush_task(d.task)
        await _report(worker, d)
    except Exception:
        log.exception("worqr: error while running task %s", d.task.id)
    finally:
        _finish(worker, d)


def _launch(worker, d):
    """Start ``d``'s handler (``d.handle``)."""
    task, func = d.task, d.spec.func
    if isinstance(task.payload, crypto.Sealed):  # an encrypted queue's: opened here, for the handler
        try:
            task.payload = crypto.open_payload(worker.config, task)
        except crypto.PayloadUnreadable as exc:  # the task fails with it; the worker goes on
            d.handle = worker.loop.create_future()
            d.handle.set_exception(exc)
            return
    task.attach_sink(worker.progress)  # task.progress() and task.log() (an isolated one's come up its socket)
    if worker.tracing:  # the run span; the handler runs with it as its current span
        d.span = tracing.start_run(task, worker.name)
        func = tracing.bind(d.span, func, d.is_async)
    if d.start_by is not None and not d.isolated:  # (an isolated one's process looks itself)
        func = _gated(func, d.start_by, d.is_async)
    if d.is_async:
        d.handle = asyncio.ensure_future(func(task))
    elif d.isolated:  # the handler's process makes the run span its current span
        trace = tracing.carried(d.span) if d.span is not None else ""
        d.handle = worker.procs.submit(task, trace, d.start_by)
    else:
        d.handle = worker.pool.submit(worker.loop, func, task)
        if d.handed:
            # An idle worker's pickup: the pool thread needs the GIL to start the handler, and
            # this thread would keep it through the fetcher's next call (up to its send). Give it
            # away once (``time.sleep(0)`` releases it): pickup p50 0.9-1.1 ms -> 0.7-0.8 in
            # alternate runs (README, round four).
            time.sleep(0)


def _gated(func, start_by, is_async):
    """``func``, which raises ``StartedLate`` instead of running when it starts after ``start_by``
    (``time.monotonic()``): on the pool thread, or as the coroutine first runs."""

    def late(task):
        return StartedLate(f"task {task.id}: its handler could not start within the rate's start grace")

    if is_async:

        async def run_async(task):
            if time.monotonic() > start_by:
                raise late(task)
            return await func(task)

        return run_async

    def run(task):
        if time.monotonic() > start_by:
            raise late(task)
        return func(task)

    return run


def _finish(worker, d):
    d.ended = True
    worker.reporter.release_if_due(d)
    worker.delivery_done(d)


async def _ended(handle):
    """Wait until ``handle`` is done, whatever its outcome, as ``asyncio.wait((handle,))`` does
    without its waiter future and callbacks. Unlike that, a cancel of the waiting task itself
    (only the loop's own shutdown does that) reaches the handle too, and is raised."""
    try:
        await handle
    except BaseException:
        if not handle.done() or asyncio.current_task().cancelling():
            raise


def _report_now(worker, d):
    """Report ``d``'s outcome if that needs no await (completed, cancelled); False if it does."""
    if d.reported:
        return True
    handle = d.handle
    if handle.cancelled():
        outcome, result = "cancelled", ""
    else:
        exc = handle.exception()
        if isinstance(exc, asyncio.CancelledError) or (exc is None and d.task.cancelled):
            outcome, result = "cancelled", ""
        elif exc is None:
            outcome, result = "completed", _result_of(d.spec, handle.result())
        else:
            return False
    d.reported = True
    worker.reporter.done(d, outcome, result)
    return True


async def _report(worker, d):
    if _report_now(worker, d):
        return
    d.reported = True
    exc = d.handle.exception()
    if isinstance(exc, StartedLate):  # never run: back first in line, its start not counted
        await worker.reporter.give_back(d)
    elif isinstance(exc, RetryLater):
        hold = ""
        if isinstance(exc, RateLimited):  # the whole queue, or the task's partition, waits
            hold = "p" if d.spec.limits.partition is not None else "q"
        await worker.reporter.failure(d, _describe(exc), "", retry_after=exc.seconds, hold=hold)
    elif isinstance(exc, HandlerFailed):  # raised in an isolated handler's process, described there
        await worker.reporter.failure(d, exc.description, exc.trace)
    else:
        trace = "".join(tb_module.format_exception(type(exc), exc, exc.__traceback__))
        await worker.reporter.failure(d, _describe(exc), trace[-20000:], exc=exc)
