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

import logging
import random
import time
from collections import defaultdict

from .. import commands, tracing
from ..backoff import Backoff
from ..codes import Code
from ..connection import NETWORK_ERRORS, raise_if_cancelling

log = logging.getLogger("worqr.worker")


def default(value, fallback):
    return fallback if value is None else value


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
        span = d.span
        if span is not None:
            d.span = None
            d.run_trace = tracing.traceparent(span)
            tracing.end_run(span, outcome, error, exc)
        if log.isEnabledFor(logging.INFO):
            task, ms = d.task, (time.monotonic() - d.started) * 1000
            extra = {
                "worker": self.name,
                "queue": task.queue,
                "task_id": task.id,
                "attempt": task.attempt,
                "outcome": outcome,
                "duration_ms": round(ms, 1),
            }
            if error:
                extra["error"] = error
            if span is not None and (ids := tracing.ids(span)):
                extra["trace_id"], extra["span_id"] = ids
            log.info("task %s queue=%s outcome=%s duration=%.1fms", task.id, task.queue, outcome, ms, extra=extra)

    # -- acknowledgements ------------------------------------------------------------------

    def done(self, d, outcome, result):
        """Completed or cancelled: acknowledged by the next batch."""
        self.processed += outcome == "completed"
        self.log_outcome(d, outcome)
        self.acks[d.task.queue].append((d, result))
        self.poke()

    def take_acks(self):
        """{queue: [(id, lease, result, keep[, run traceparent])]} of everything to acknowledge
        now, and the deliveries behind them: {queue: [delivery]}. ``keep`` is decided here, at
        sending time: the handler still runs, so its lock and slots stay held until it returns."""
        taken, self.acks = self.acks, defaultdict(list)
        out, behind = {}, {}
        for queue, batch in taken.items():
            out[queue] = []
            behind[queue] = []
            for d, result in batch:
                keep = d.report_sent(d.still_running())
                if d.run_trace:
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
        """Acknowledge everything pending now, one ``finish`` call per queue."""
        acks, behind = self.take_acks()
        for queue, batch in acks.items():
            call = commands.finish(queue, self.name, batch, result_ttl=self.config.result_ttl)
            codes = await self.call(call)
            if codes is not None:
                self.check_codes([d for d, _ in behind[queue]], codes)

    # -- failures --------------------------------------------------------------------------

    async def failure(self, d, error, trace, retry_after=None, exc=None):
        """A failed attempt (``exc``: the handler's exception, if any), or a deferral."""
        c, spec = self.config, d.spec
        self.failed += retry_after is None
        self.log_outcome(d, "deferred" if retry_after is not None else "failed", error, exc)
        keep = d.report_sent(d.still_running())
        call = commands.fail(
            d.task.queue,
            self.name,
            d.task.id,
            d.task.lease,
            error,
            trace,
            retries=default(spec.retries, c.retries),
            backoff=default(spec.backoff, c.backoff),
            backoff_max=c.backoff_max,
            jitter=random.random() * c.backoff_jitter,
            history=c.failure_history,
            retry_after=retry_after,
            keep=keep,
            trace=d.run_trace,
        )
        code = await self.call(call)
        if code == Code.STALE:
            log.warning("worqr: task %s: lease %s is stale; failure refused", d.task.id, d.task.lease)
            self._stale(d)

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
        for _ in range(attempts):
            try:
                return await call.arun(self.redis)
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                log.warning("worqr: %s failed (%s); retrying", call.script, exc)
                await backoff.wait()
        log.error("worqr: gave up on %s for queue %s; the lease will expire", call.script, call.queue)
        return None
