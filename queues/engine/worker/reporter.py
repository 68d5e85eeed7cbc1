"""Reports outcomes to Redis for a worker.

- completed and cancelled tasks are acknowledged in batches: the launcher's fetch loop takes
  them (``take_acks``) and sends them with its next ``start`` call for that queue, so a busy
  worker acknowledges and fetches in one round trip; ``flush`` sends them alone (shutdown);
- failures and stops are sent at once (they are rarer, and a failure's retry timing counts);
- every call is retried through network errors with backoff; a stale lease is logged, not raised.
"""

import asyncio
import logging
import random
import time
from collections import defaultdict

from .. import scripts
from ..connection import NETWORK_ERRORS

log = logging.getLogger("worqr.worker")


def _default(value, fallback):
    return fallback if value is None else value


class Reporter:
    def __init__(self, worker):
        self.w = worker
        self.acks = defaultdict(list)

    def _log(self, d, outcome):
        if log.isEnabledFor(logging.INFO):
            log.info("task %s queue=%s outcome=%s duration=%.1fms", d.task.id, d.task.queue, outcome,
                     (time.monotonic() - d.started) * 1000)

    def done(self, d, outcome, result):
        """Completed or cancelled: acknowledged by the next batch."""
        self.w.processed += outcome == "completed"
        self._log(d, outcome)
        self.acks[d.task.queue].append((d.task.id, d.task.lease, result))
        self.w.kick.set()
        self.w.slot_freed.set()

    def take_acks(self):
        """{queue: [(id, lease, result)]} of everything to acknowledge, handed to the caller."""
        acks, self.acks = self.acks, defaultdict(list)
        return acks

    def put_back(self, acks):
        for queue, batch in acks.items():
            self.acks[queue][:0] = batch

    def check_codes(self, batch, codes):
        for (task_id, lease, _), code in zip(batch, codes):
            if code == -1:
                log.warning("worqr: task %s: lease %s is stale; completion refused", task_id, lease)

    async def failure(self, d, error, trace, retry_after=None):
        c, spec = self.w.config, d.spec
        self.w.failed += retry_after is None
        self._log(d, "deferred" if retry_after is not None else "failed")
        code = await self._call_retrying(
            "fail", d.task.queue, self.w.name, d.task.id, d.task.lease, error, trace,
            _default(spec.retries, c.retries), _default(spec.backoff, c.backoff), c.backoff_max,
            random.random() * c.backoff_jitter, c.failure_history,
            "" if retry_after is None else max(0.0, retry_after),
        )
        if code == -1:
            log.warning("worqr: task %s: lease %s is stale; failure refused", d.task.id, d.task.lease)

    async def stop(self, d):
        self._log(d, "stopped")
        await self._call_retrying("stop", d.task.queue, self.w.name, 1, d.task.id, d.task.lease)

    async def _call_retrying(self, script, queue, *args, attempts=20):
        backoff = 0.05
        for _ in range(attempts):
            try:
                return await scripts.arun(self.w.redis, script, queue, *args)
            except NETWORK_ERRORS as exc:
                log.warning("worqr: %s failed (%s); retrying", script, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        log.error("worqr: gave up on %s for queue %s; the lease will expire", script, queue)
        return None

    async def flush(self):
        """Acknowledge everything pending now, one ``finish`` call per queue."""
        ttl_ms = int(self.w.config.result_ttl * 1000)
        for queue in list(self.acks):
            batch = self.acks.pop(queue, [])
            if not batch:
                continue
            args = [x for triple in batch for x in triple]
            codes = await self._call_retrying("finish", queue, self.w.name, len(batch), ttl_ms, *args)
            if codes is not None:
                self.check_codes(batch, codes)

