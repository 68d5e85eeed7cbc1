"""Reports outcomes to Redis for a worker.

- completed and cancelled tasks are acknowledged in batches: the fetcher takes them
  (``take_acks``) and sends them with its next ``start`` call for that queue, so a busy worker
  acknowledges and fetches in one round trip; ``flush`` sends them alone (shutdown);
- failures are sent at once (they are rarer, and a failure's retry timing counts);
- an outcome reported while the handler still runs (a timeout, a cancel of a sync handler)
  keeps the task's lock held, and its slots under the queue's and partition's concurrency;
  once the handler has really returned, they are released (``release_if_due``; the fetcher
  sends the releases, always after the report they follow);
- every call is retried through network errors with backoff; a stale lease is logged, not
  raised (the task was taken from this worker, which then also releases any lock kept for it).
"""

import json
import logging
import random
import time
from collections import defaultdict

from .. import commands, durations, keys, tracing
from ..backoff import Backoff
from ..codes import Code
from ..connection import NETWORK_ERRORS, raise_if_cancelling
from ..numbers import MAX_RETRIES

log = logging.getLogger("worqr.worker")


def default(value, fallback):
    return fallback if value is None else value


def _seconds(value):
    """``20``, ``21.3``, ``0.5``: seconds as a log line shows them."""
    return f"{value:.1f}".removesuffix(".0")


def handler_name(d):
    """The name ``d``'s outcome is charted under besides its queue (''): what its handler's
    ``worqr_handler_name(task)`` gives (the Tasks backend's: the function's path), if a valid
    handler name (``durations.is_handler_name``)."""
    namer = getattr(getattr(d.spec, "func", None), "worqr_handler_name", None)
    if namer is None:
        return ""
    try:
        name = namer(d.task)
    except Exception:  # a payload it can't read: charted with its queue only
        return ""
    return name if durations.is_handler_name(name) else ""


class Reporter:
    def __init__(self, name, config, redis, poke):
        """Reports for worker ``name`` on ``redis``; ``poke()`` wakes the fetcher, which sends the
        acknowledgements and releases."""
        self.name, self.config, self.redis, self.poke = name, config, redis, poke
        self.acks = defaultdict(list)  # queue -> [(delivery, result)]
        self.releases = defaultdict(list)  # queue -> [(id, lease)]
        self.processed = self.failed = 0

    def log_outcome(self, d, outcome, error=None, exc=None):
        """Log an attempt's outcome (one line at INFO; the JSON format's fields in ``extra``) and
        end its run span."""
        ran = self.end_run(d, outcome, error, exc)
        self.log_line(d, outcome, ran, error)

    def end_run(self, d, outcome, error=None, exc=None):
        """End ``d``'s run span: (its run time in ms, the span's (trace id, span id) or None)."""
        span, ids = d.span, None
        if span is not None:
            d.span = None
            d.run_trace = tracing.traceparent(span)
            tracing.end_run(span, outcome, error, exc)
            ids = tracing.ids(span)
        return (time.monotonic() - d.started) * 1000, ids

    def log_line(self, d, outcome, ran, error=None, *, attempts=None, retry_in=None, level=logging.INFO, **kw):
        """The outcome's line: ``task <id> queue=<q> outcome=<o> duration=<ms>ms``, then for a
        failure ``attempt=<n>/<of>``, ``retry_in=<s>s`` (when it runs again) and ``error="..."``.
        ``kw``: ``exc_info`` or ``trace`` (the traceback text) for a final failure."""
        if not log.isEnabledFor(level):
            return
        task, (ms, ids) = d.task, ran
        extra = {
            "worker": self.name,
            "queue": task.queue,
            "task_id": task.id,
            "attempt": task.attempt,
            "outcome": outcome,
            "duration_ms": round(ms, 1),
        }
        text = f"task {task.id} queue={task.queue} outcome={outcome} duration={ms:.1f}ms"
        if attempts is not None:
            text += f" attempt={task.attempt}/{attempts}"
        if retry_in is not None:
            extra["retry_in"] = round(retry_in, 1)
            text += f" retry_in={_seconds(retry_in)}s"
        if error:
            extra["error"] = error
            text += f" error={json.dumps(error, ensure_ascii=False)}"
        if ids:
            extra["trace_id"], extra["span_id"] = ids
        if trace := kw.get("trace"):  # an isolated handler's, described in its process
            extra["traceback"] = trace.rstrip()
            text += "\n" + extra["traceback"]
        log.log(level, "%s", text, extra=extra, exc_info=kw.get("exc_info"))

    # -- acknowledgements ------------------------------------------------------------------

    def done(self, d, outcome, result):
        """Completed or cancelled: acknowledged by the next batch."""
        self.processed += outcome == "completed"
        self.log_outcome(d, outcome)
        self.acks[d.task.queue].append((d, result))
        self.poke()

    def take_acks(self):
        """{queue: [(id, lease, result, keep[, run traceparent[, handler name]])]} of what to
        acknowledge now, and the deliveries behind them: {queue: [delivery]}. ``keep`` is decided
        here, at sending time: the handler still runs, so its lock and slots stay held until it
        returns. A queue's kept results weigh at most MAX_RESULT_BYTES in one call (its first
        included, whatever its size): the rest wait for the next call (``acks`` still holds them)."""
        taken, self.acks = self.acks, defaultdict(list)
        out, behind = {}, {}
        room = self.config.max_result_bytes
        for queue, batch in taken.items():
            weight = 0
            for i, (_, result) in enumerate(batch):
                weight += len(result)
                if weight > room and i:
                    self.acks[queue] = batch[i:]
                    batch = batch[:i]
                    break
            out[queue] = []
            behind[queue] = []
            for d, result in batch:
                keep = d.report_sent(d.still_running())
                name = handler_name(d)
                if name:
                    out[queue].append((d.task.id, d.task.lease, result, keep, d.run_trace, name))
                elif d.run_trace:
                    out[queue].append((d.task.id, d.task.lease, result, keep, d.run_trace))
                else:
                    out[queue].append((d.task.id, d.task.lease, result, keep))
                behind[queue].append((d, result))
        return out, behind

    def put_back(self, behind):
        """Acknowledgements whose call failed: sent again with the next batch (a repeat of one
        that did land is refused as stale, harmlessly)."""
        for queue, batch in behind.items():
            self.acks[queue][:0] = batch

    def pending_keys(self):
        """(id, lease) of the deliveries whose acknowledgement has not been sent yet."""
        return {d.key for batch in self.acks.values() for d, _ in batch}

    def check_codes(self, deliveries, codes):
        for d, code in zip(deliveries, codes):
            if code == Code.STALE:
                log.warning("worqr: task %s: lease %s is stale; completion refused", d.task.id, d.task.lease)
                self._stale(d)
            else:
                self.release_if_due(d)

    async def flush(self):
        """Acknowledge everything pending now, one ``finish`` call per queue; how many could not
        be (their calls never got through)."""
        unsent = 0
        while self.acks:
            acks, behind = self.take_acks()
            for queue, batch in acks.items():
                call = commands.finish(queue, self.name, batch, result_ttl=self.config.result_ttl)
                codes = await self.call(call)
                if codes is not None:
                    self.check_codes([d for d, _ in behind[queue]], codes)
                else:
                    # its call never got through: the rest would not either
                    unsent += len(batch) + len(self.acks.pop(queue, ()))
        return unsent

    # -- failures --------------------------------------------------------------------------

    async def failure(self, d, error, trace, retry_after=None, exc=None, hold=""):
        """A failed attempt (``exc``: the handler's exception, if any), or a deferral (``hold``:
        a RateLimited hold of the queue or partition). Its line says what happens next (the
        script decides: ``attempt=2/4 retry_in=20s``, or a final failure at ERROR with its
        traceback)."""
        c, spec = self.config, d.spec
        self.failed += retry_after is None
        outcome = "deferred" if retry_after is not None else "failed"
        ran = self.end_run(d, outcome, error, exc)
        keep = d.report_sent(d.still_running())
        retries = d.task.retries if d.task.retries is not None else default(spec.retries, c.retries)
        backoff = default(spec.backoff, c.backoff)
        jitter = random.random() * c.backoff_jitter
        call = commands.fail(
            d.task.queue,
            self.name,
            d.task.id,
            d.task.lease,
            error,
            trace,
            retries=retries,
            backoff=backoff,
            backoff_max=c.backoff_max,
            jitter=jitter,
            history=c.failure_history,
            retry_after=retry_after,
            keep=keep,
            trace=d.run_trace,
            hold=hold,
            handler=handler_name(d),
        )
        code = await self.call(call)
        if code == Code.STALE:
            self.log_line(d, outcome, ran, error)
            log.warning("worqr: task %s: lease %s is stale; failure refused", d.task.id, d.task.lease)
            self._stale(d)
        elif code == Code.RETRYING:
            backoff = await self._own_backoff(d, backoff)
            # (the exponent capped as failure.lua caps it, for a task stored with more retries)
            wait = min(backoff * 2 ** min(max(d.task.attempt - 1, 0), MAX_RETRIES), c.backoff_max) * (1 + jitter)
            self.log_line(d, outcome, ran, error, attempts=retries + 1, retry_in=wait, level=logging.WARNING)
        elif code == Code.FAILED:
            details = {"exc_info": exc} if exc is not None else {"trace": trace}
            self.log_line(d, outcome, ran, error, attempts=retries + 1, level=logging.ERROR, **details)
        elif code == Code.CANCELLED:
            self.log_line(d, "cancelled", ran, error)
        else:  # deferred, or the report never got through
            self.log_line(d, outcome, ran, error, retry_in=retry_after)

    async def _own_backoff(self, d, fallback):
        """The backoff the task was enqueued with (``backoff=``, its hash's ``b``: the script
        waits by it), else ``fallback`` (the handler's or the worker's). One read, for a retried
        failure's log line only; Redis out of reach: ``fallback``."""
        try:
            own = await self.redis.hget(keys.task_key(d.task.queue, d.task.id), "b")
        except NETWORK_ERRORS:
            return fallback
        return float(own) if own else fallback

    async def give_back(self, d):
        """``d``'s handler was never run (it could not start within its rate's start grace): its
        task goes back first in line, the attempt and its start not counted."""
        self.log_outcome(d, "late")
        codes = await self.call(commands.stop(d.task.queue, self.name, [(d.task.id, d.task.lease, "unstarted")]))
        if codes is not None and codes[0] == Code.STALE:
            self._stale(d)

    # -- locks kept for handlers that still ran --------------------------------------------

    def _stale(self, d):
        """A report was refused: whoever took the task may have kept its lock for this handler."""
        d.refused()
        self.release_if_due(d)

    def release_if_due(self, d):
        """Queue the release of what was kept for ``d`` (its lock, its slots under the limits)
        once its handler has returned: sent for every delivery reported with keep, whether or
        not it had a lock or slots (the script ignores holders it keeps nothing for)."""
        if d.release_due():
            self.releases[d.task.queue].append(d.key)
            self.poke()

    def release_unknown(self, queue, task_id, lease):
        """Queue the release of what Redis keeps for (``task_id``, ``lease``), a delivery this
        worker does not run (the script ignores it if nothing is kept)."""
        self.releases[queue].append((task_id, lease))
        self.poke()

    async def send_releases(self):
        releases, self.releases = self.releases, defaultdict(list)
        for queue, holders in releases.items():
            await self.call(commands.release(queue, self.name, holders))

    # -- calls -----------------------------------------------------------------------------

    async def call(self, call, attempts=20):
        """Run a command, retrying through network errors; None if it never got through."""
        backoff = Backoff()
        for attempt in range(attempts):
            try:
                return await call.arun(self.redis)
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                level = logging.WARNING if attempt == 0 else logging.DEBUG  # one line per call, not per try
                log.log(level, "worqr: %s failed (%s); retrying", call.script, exc)
                await backoff.wait()
        log.error("worqr: gave up on %s for queue %s; the lease will expire", call.script, call.queue)
        return None
