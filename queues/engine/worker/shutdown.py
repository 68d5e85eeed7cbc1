"""Shutdown: how a worker that was told to stop (``Worker.request_stop``) leaves.

1. Take no more work (the fetcher's loop has ended) and let running tasks finish for up to the
   worker's ``grace`` seconds (a second stop signal sets it to 0: they are given back at once);
   generator handlers stop at their next yield, save their checkpoint and are given back then.
2. Stop the handlers still running (an async one is cancelled, an isolated one's process
   killed; a sync thread cannot be stopped: its task's lock stays held until it returns).
3. Give those tasks back to the front of their queues, in the order they started (one ``stop``
   call per queue), then deregister: leave each queue, drop the heartbeat, and be remembered
   as gone ("stopped").
"""

import asyncio
import logging
import time
from collections import defaultdict

from .. import commands, keys
from ..backoff import wait_event
from ..connection import NETWORK_ERRORS

log = logging.getLogger("worqr.worker")


async def shutdown(capsule, status, deliveries, reporter, progress, heart, redis):
    """Wait out the grace (``status.grace``, which a second stop signal ends), give back what
    still runs of ``deliveries``, and deregister the worker."""
    began = time.monotonic()
    stranded = 0  # tasks left active in Redis under this worker's name: neither given back nor acknowledged
    if deliveries:
        log.info("worqr: stopping: waiting up to %.0f s for %d task(s)", status.grace, len(deliveries))
    while deliveries.unreported() and time.monotonic() < began + status.grace:
        status.changed.clear()
        await wait_event(status.changed, max(0.0, began + status.grace - time.monotonic()))
        stranded += await reporter.flush()
    await progress.flush()  # what handlers logged stays with the tasks given back
    left = deliveries.unreported()
    for d in left:
        d.report()
        reporter.log_outcome(d, "stopped")  # before its end, which would log it as the worker's error
        d.stop_now()
    # Until stopped handlers really end (or, not started yet, their start's checks are over)
    ends = [d.handle or d.runner for d in left if d.stoppable and (d.handle or d.runner) is not None]
    if ends:
        await asyncio.wait(ends, timeout=2.0)
    by_queue = defaultdict(list)
    for d in left:
        keep = d.report_sent(d.still_running())
        by_queue[d.task.queue].append((d.task.id, d.task.lease, keep))
    for d in left:  # a generator handler's last yield, saved before its task goes back
        if d.checkpoints is not None:
            await d.checkpoints.save()
    for queue, items in by_queue.items():
        if await reporter.call(commands.stop(queue, capsule.name, items)) is None:
            stranded += len(items)
    stranded += await reporter.flush()
    await reporter.send_releases()
    try:
        for q in capsule.queues:
            await commands.unregister(q, capsule.name, "worker_left").arun(redis)
        await heart.leave(heart.gone_entry("stopped"))  # before its heartbeat key goes (``Heart.leave``)
        await redis.delete(keys.heartbeat_key(capsule.name))
    except NETWORK_ERRORS as exc:
        left_without_deregistering(stranded, exc)


def left_without_deregistering(stranded, exc):
    """Say what a stop without Redis leaves behind, and no more: ``stranded`` tasks (not given
    back, or run but not acknowledged) run again once Redis is back and a worker of their queue
    presumes this one dead; with none, nothing waits on this worker."""
    if stranded:
        log.error(
            "worqr: stopped without deregistering: Redis is out of reach (%s). %d task(s) of this worker "
            "could not be given back or acknowledged: they run again once Redis is back and a worker of "
            "their queue presumes this one dead (HEARTBEAT_TTL after Redis answers)",
            exc,
            stranded,
        )
    else:
        log.warning(
            "worqr: stopped without deregistering: Redis is out of reach (%s). This worker held no "
            "tasks; it is listed as gone once Redis is back",
            exc,
        )
