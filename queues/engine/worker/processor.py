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

from .. import crypto, keys, tracing
from ..connection import NETWORK_ERRORS
from ..errors import RateLimited, RetryLater
from ..limits import StartedLate
from . import checkpoints
from .chunks import Part
from .contained import RESULT_UNKEPT, contained, describe, raised, result_text
from .delivery import State
from .procpool import HandlerFailed

log = logging.getLogger("worqr.worker")


def _result_of(spec, value, limit):
    """What is kept of a handler's return value (``limit``: MAX_RESULT_BYTES)."""
    if not spec.keep_result or value is None:
        return ""
    return result_text(value, limit)


def _result_error(spec, value, limit):
    """The attempt's error when its kept result could not be kept."""
    try:
        _result_of(spec, value, limit)
    except (TypeError, ValueError) as exc:
        return exc.with_traceback(None)  # the refusal's own (worqr's lines) would say nothing of the handler
    return TypeError(RESULT_UNKEPT + "an error")  # (it raised only the first time)


class Processor:
    """Runs deliveries: ``name`` (the worker's), ``tracing`` (run spans on), ``loop``, ``pool``
    (sync handlers), ``procs`` (isolated ones; None without), ``reporter`` and ``progress`` (the
    handlers' reports, flushed before an outcome), ``redis``; ``unresponsive()`` tells whether
    the worker may have been presumed dead; ``on_done(d)`` frees a delivery's slot; ``config``
    (its ``ENCRYPTION_KEYS`` open an encrypted queue's payloads before the handler runs);
    ``checkpoints`` (a ``checkpoints.Context``) runs generator handlers."""

    def __init__(
        self,
        name,
        *,
        tracing,
        loop,
        pool,
        procs,
        reporter,
        progress,
        redis,
        unresponsive,
        on_done,
        config=None,
        checkpoints=None,
    ):
        self.name, self.tracing, self.loop, self.pool, self.procs = name, tracing, loop, pool, procs
        self.reporter, self.progress, self.redis = reporter, progress, redis
        self.unresponsive, self.on_done, self.config = unresponsive, on_done, config
        self._result_limit = config.max_result_bytes if config is not None else None
        self.checkpoints = checkpoints

    def start(self, d):
        """Start delivery ``d``: its handler starts here, a loop timer stands for its timeout, and
        a callback on its end reports the outcome. No asyncio task of the delivery's own (a sixth
        of a worker's time per task with a no-op handler went to starting and resuming one): a
        task only for what must be awaited, the checks of a worker that may have been presumed
        dead (``_checked``), a failure's report or a log to send first (``_end``), a timeout
        (``_time_out``)."""
        if self.unresponsive():
            d.runner = self.loop.create_task(self._checked(d))
        else:
            self._go(d)

    async def still_holds(self, task):
        """Whether Redis still has ``task`` active on this worker under the same lease."""
        try:
            lease, state, worker = await self.redis.hmget(keys.task_key(task.queue, task.id), "l", "s", "w")
        except NETWORK_ERRORS:
            return True  # can't tell: run it; the lease still fences its outcome
        return state == b"active" and worker == self.name.encode() and lease is not None and int(lease) == task.lease

    async def _checked(self, d):
        """Start ``d`` if this worker still holds it."""
        try:
            held = await self.still_holds(d.task)
        except Exception:
            log.exception("worqr: error while running task %s", d.task.id)
            held = True  # can't tell: run it; the lease still fences its outcome
        if held:
            self._go(d)
            return
        # We may have been frozen (or cut off) long enough to be presumed dead: the task was handed
        # to us before that and has since been taken back. Don't run it twice.
        log.warning("worqr: task %s was taken back while this worker was unresponsive; not running it", d.task.id)
        if not d.reported:
            d.report()
        self._finish(d)

    def _go(self, d):
        task = d.task
        try:
            if d.reported or task.cancelled:  # cancelled (or given back) before it could start
                if not d.reported:
                    d.report()
                    self.reporter.done(d, "cancelled", "")
                self._finish(d)
                return
            self._launch(d)
            if task.timeout and task.timeout > 0:
                d.timer = self.loop.call_later(task.timeout, self._timed_out, d)
            if isinstance(d.handle, Part) and not d.handle.done():  # its chunk reports it (``Chunk.part_done``)
                d.handle.report_with(self._handle_ended)
            else:
                d.handle.add_done_callback(functools.partial(self._handle_ended, d))
        except Exception:  # a bug here must not kill the worker; the task is recovered by lease
            log.exception("worqr: error while running task %s", task.id)
            if not d.ended:
                self._finish(d)

    def _handle_ended(self, d, handle):
        """The handler ended: report it now if that needs no await, else in a task (``_end``).
        One whose timeout fired is ``_time_out``'s to end."""
        if d.timer is not None:
            d.timer.cancel()
        if d.state is State.TIMING_OUT:
            return
        try:
            if self.progress.pending(d.task) or not self._report_now(d):  # its log goes before its outcome
                d.runner = self.loop.create_task(self._end(d))
                return
        except Exception:
            log.exception("worqr: error while running task %s", d.task.id)
        self._finish(d)

    def _timed_out(self, d):
        """The handler ran past its timeout (unless it ended in the same loop turn: then its end
        callback reports it as it ended). One whose outcome is already reported (a cancelled sync
        handler) is asked to stop again; its end callback ends it."""
        if d.handle.done():
            return
        if d.state is not State.RUNNING:
            d.cancel_locally()
            return
        d.time_out()
        d.runner = self.loop.create_task(self._time_out(d))

    async def _time_out(self, d):
        """Stop the handler (an async one is cancelled, an isolated one's process ended, a sync
        one asked through ``task.cancelled``), report a failed attempt at once, and end the
        delivery only once the handler has really returned (the slot, and a lock, stay taken
        until then)."""
        try:
            if d.checkpoints is not None:  # a generator: stopped at its next yield, its checkpoint saved
                await d.checkpoints.stop_at_yield()
            d.cancel_locally()
            if self.progress.pending(d.task):
                await self.progress.flush_task(d.task)
            await self.reporter.failure(d, f"TaskTimeout: ran longer than its timeout of {d.task.timeout:g} s", "")
            await _ended(d.handle)
        except Exception:
            log.exception("worqr: error while running task %s", d.task.id)
        finally:
            self._finish(d)

    async def _end(self, d):
        try:
            if self.progress.pending(d.task):
                await self.progress.flush_task(d.task)
            await self._report(d)
        except Exception:
            log.exception("worqr: error while running task %s", d.task.id)
        finally:
            self._finish(d)

    def _launch(self, d):
        """Start ``d``'s handler."""
        task, func = d.task, d.spec.func
        if isinstance(task.payload, crypto.Sealed):  # an encrypted queue's: opened here, for the handler
            d.sealed = True
            try:
                task.payload = crypto.open_payload(self.config, task)
            except crypto.PayloadUnreadable as exc:  # the task fails with it; the worker goes on
                failed = self.loop.create_future()
                failed.set_exception(exc)
                d.launched(failed)
                return
        task.attach_sink(self.progress)  # task.progress() and task.log() (an isolated one's come up its socket)
        if d.spec.checkpointed:  # a generator handler: its yields are checkpoints
            d.checkpoints = checkpoints.Run(self.checkpoints, d)
            func = d.checkpoints.wrap(func)
        if self.tracing:  # the run span (the handler runs with it as its current span: bound below)
            d.span = tracing.start_run(task, self.name)
        if d.chunk is not None:  # a chunk handler's task: its share of the chunk's call (chunks.Chunk)
            d.launched(d.chunk.part(d))
            return
        if self.tracing:
            func = tracing.bind(d.span, func, d.is_async)
        if d.start_by is not None and not d.isolated:  # (an isolated one's process looks itself)
            func = _gated(func, d.start_by, d.is_async)
        if d.is_async:
            d.launched(asyncio.ensure_future(contained(func(task))))
        elif d.isolated:  # the handler's process makes the run span its current span
            trace = tracing.carried(d.span) if d.span is not None else ""
            d.launched(self.procs.submit(task, trace, d.start_by))
        else:
            d.launched(self.pool.submit(self.loop, func, task))
            if d.handed:
                # An idle worker's pickup: the pool thread needs the GIL to start the handler, and
                # this thread would keep it through the fetcher's next call (up to its send). Give
                # it away once (``time.sleep(0)`` releases it): pickup p50 0.9-1.1 ms -> 0.7-0.8
                # in alternate runs.
                time.sleep(0)

    def _finish(self, d):
        d.finish()
        self.reporter.release_if_due(d)
        self.on_done(d)

    def _report_now(self, d):
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
            elif exc is None and handle.result() is checkpoints.STOPPED:  # given back: ``_report``
                return False
            elif exc is None:
                try:
                    outcome, result = "completed", _result_of(d.spec, handle.result(), self._result_limit)
                    if result and d.sealed:  # sealed as its payload was, for its task
                        result = crypto.keyring(self.config).seal(d.task.queue, d.task.id, result, "b", part="result")
                except Exception:  # its ``str()`` raised: a failed attempt, reported by ``_report``
                    return False
            else:
                return False
        d.report()
        self.reporter.done(d, outcome, result)
        return True

    async def _report(self, d):
        if self._report_now(d):
            return
        d.report()
        exc = raised(d.handle.exception())
        if exc is None and d.handle.result() is not checkpoints.STOPPED:  # a result with no text
            exc = _result_error(d.spec, d.handle.result(), self._result_limit)
        if exc is None:  # a generator handler stopped at a checkpoint (the worker stops)
            await checkpoints.give_back(self.reporter, d)
        elif isinstance(exc, StartedLate):  # never run: back first in line, its start not counted
            await self.reporter.give_back(d)
        elif isinstance(exc, RetryLater):
            hold = ""
            if isinstance(exc, RateLimited):  # the whole queue, or the task's partition, waits
                hold = "p" if d.spec.limits.partition is not None else "q"
            await self.reporter.failure(d, describe(exc), "", retry_after=exc.seconds, hold=hold)
        elif isinstance(exc, HandlerFailed):  # raised in an isolated handler's process, described there
            await self.reporter.failure(d, exc.description, exc.trace)
        else:
            trace = "".join(tb_module.format_exception(type(exc), exc, exc.__traceback__))
            await self.reporter.failure(d, describe(exc), trace[-20000:], exc=exc)


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


async def _ended(handle):
    """Wait until ``handle`` is done, whatever its outcome, as ``asyncio.wait((handle,))`` does
    without its waiter future and callbacks. Unlike that, a cancel of the waiting task itself
    (only the loop's own shutdown does that) reaches the handle too, and is raised."""
    try:
        await handle
    except BaseException:
        if not handle.done() or asyncio.current_task().cancelling():
            raise
