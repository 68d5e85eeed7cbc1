"""Fetcher: gets work for a worker's free slots, and takes stock of what it holds.

1. Waits for the control channel's first subscription, so no hand-over or cancel is missed.
2. Each round: sends the lock releases due, takes stock if asked (after every (re)subscribe or a
   lost reply), then asks each queue in priority order for as many tasks as there are free
   slots, acknowledging finished tasks in the same ``start`` call.
3. When that leaves slots free, the worker is in every queue's idle set (``start`` put it there
   atomically) and the fetcher sleeps until something changes (a wake-up, a hand-over, a slot
   freed, an acknowledgement to send) or the next delayed task is due. No polling.
4. Tasks handed straight to the worker over its control channel are run at once, or given back
   to the front of their queue when the worker can't take them.
"""

import asyncio
import logging
import time
from collections import defaultdict, deque

from .. import commands, faults, keys
from ..backoff import Backoff, wait_event
from ..codes import Code
from ..connection import NETWORK_ERRORS, raise_if_cancelling
from . import processor

log = logging.getLogger("worqr.worker")


class Fetcher:
    def __init__(self, worker):
        self.w = worker
        self.idle_in = set()  # queues whose idle set we are in (start put us there)
        self.stock_needed = False
        #: (id, lease) of deliveries given back unstarted: a late hand-over of one is ignored
        self.given_back = deque(maxlen=10000)

    def take_stock_soon(self):
        """Take stock before the next fetch (after a (re)subscribe: a task handed to us, or a
        cancel sent, while we were not listening would otherwise be missed)."""
        self.stock_needed = True

    def registered(self):
        """The worker (re)registered: it is in no queue's idle set."""
        self.idle_in.clear()

    # -- the loop --------------------------------------------------------------------------

    async def run(self):
        w = self.w
        await asyncio.wait(
            [asyncio.ensure_future(e.wait()) for e in (w.subscribed, w.stop_event)], return_when=asyncio.FIRST_COMPLETED
        )
        backoff, failing = Backoff(), False
        fault = faults.active("fetch-yield-sigterm")
        while True:
            if w.deliveries:
                await asyncio.sleep(0)  # let completions that are already due land: bigger batches
                if fault:
                    await faults.sigterm_once("fetch-yield-sigterm", lambda: w.stopping)
            # Look at ``stopping`` only now, with no await before the clear: a stop that came
            # during the yield above was cleared with ``changed`` and the fetcher slept on, its
            # task running, until something else changed (a supervisor's SIGTERM seen ignored).
            if w.stopping:
                break
            w.changed.clear()
            acks, behind = {}, {}
            try:
                await w.reporter.send_releases()
                if self.stock_needed:
                    await self.take_stock()
                free = w.free_slots()
                acks, behind = w.reporter.take_acks()
                if free <= 0 and not acks:
                    await wait_event(w.changed, None if w.registered else 1.0)
                    continue
                try:
                    taken, due_ms, more = await self._fetch(free, acks, behind)
                finally:
                    w.reporter.put_back(behind)  # what was not sent goes with the next batch
                backoff.reset()
                failing = False
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                # The call may have run with its reply lost: acknowledgements are sent again
                # (a repeat is refused as stale, harmlessly) and tasks held in Redis but unknown
                # here would be stranded, so take stock and give those back.
                self.stock_needed = True
                # Once per outage (the heartbeat's lines say when Redis is out of reach and back).
                log.log(logging.DEBUG if failing else logging.WARNING, "worqr: fetch failed (%s); retrying", exc)
                failing = True
                await backoff.wait(w.stop_event)
                continue
            for d in taken:
                w.start_delivery(d)
            if 0 < free and len(taken) < free and not more and not w.reporter.acks and not w.reporter.releases:
                await wait_event(w.changed, None if due_ms < 0 else due_ms / 1000)

    async def _fetch(self, free, acks, behind):
        """Acknowledge ``acks`` and take up to ``free`` tasks, queue by queue in priority order.
        Returns (deliveries, ms until the next due task or -1, whether to look again at once).
        The deliveries behind each batch sent are removed from ``behind``."""
        w, c = self.w, self.w.config
        taken, due_ms, more = [], -1, False
        for q in w.queues:
            want = free - len(taken)
            batch = acks.pop(q, [])
            if want <= 0 and not batch:
                continue
            spec = w.specs[q]
            call = commands.start(
                q,
                w.name,
                max(want, 0),
                lock_ttl=c.lock_ttl,
                grace=c.timeout_grace,
                default_timeout=spec.timeout,
                result_ttl=c.result_ttl,
                acks=batch,
            )
            asked = time.monotonic()  # a rate-limited queue's handlers start within its grace of it
            reply = await call.arun(w.redis)
            if batch:
                w.reporter.check_codes([d for d, _ in behind.pop(q)], reply.codes)
            if want <= 0:
                continue
            if reply.status == Code.NOT_REGISTERED:
                w.lost_registration([q])
                return taken, -1, False
            if reply.status == Code.LATE:
                # Our deadline has passed (beats failed): the next beat of another worker may
                # reap us and run again what we took. Take nothing until we have beaten.
                log.warning(
                    "worqr: worker %s is late in %s (its deadline passed): beating before taking more", w.name, q
                )
                w.heart.beat_soon()
                return taken, -1, False
            if reply.due_in_ms >= 0:
                due_ms = reply.due_in_ms if due_ms < 0 else min(due_ms, reply.due_in_ms)
            for task in reply.tasks:
                d = processor.Delivery(task, w.spec_for(q, task))
                if reply.grace_ms:
                    d.start_by = asked + reply.grace_ms / 1000
                taken.append(d)
            more = more or reply.status == Code.MORE
            if len(reply.tasks) < want and reply.status != Code.MORE:
                self.idle_in.add(q)
            else:
                self.idle_in.discard(q)
        if free and len(taken) >= free and self.idle_in:
            # Full: leave the idle sets of the queues we did not get to, so wake-ups go to others.
            p = w.redis.pipeline(transaction=False)
            for q in self.idle_in:
                p.srem(keys.queue_key(q, "idle"), w.name)
            await p.execute()
            self.idle_in.clear()
        return taken, due_ms, more

    # -- taking stock ----------------------------------------------------------------------

    async def take_stock(self):
        """Compare what Redis says this worker holds with what it runs: give back to the front
        the tasks it holds but never received (a hand-over lost while disconnected), and stop
        the tasks it runs that were cancelled while it was not listening. What is decided is
        decided without awaiting, so a hand-over arriving meanwhile can't be given back too."""
        w = self.w
        self.stock_needed = False  # set again if a give-back fails
        p = w.redis.pipeline(transaction=False)
        for q in w.queues:
            p.smembers(keys.worker_tasks_key(q, w.name))
        held = [(q, raw.decode()) for q, ids in zip(w.queues, await p.execute()) for raw in ids]
        p = w.redis.pipeline(transaction=False)
        for q, task_id in held:
            p.hmget(keys.task_key(q, task_id), "l", "s", "w", "x")
        rows = await p.execute() if held else []
        give_back = defaultdict(list)
        pending_acks = w.reporter.pending_keys()
        for (q, task_id), (lease, state, holder, cancel) in zip(held, rows):
            if lease is None or state != b"active" or holder != w.name.encode():
                continue
            key = (task_id, int(lease))
            d = w.deliveries.get(key)
            if d is not None:
                if cancel is not None and not d.task.cancelled:
                    log.info("worqr: task %s was cancelled while we were not listening; stopping it", task_id)
                    w.cancel_delivery(d)
                continue
            if key in pending_acks:
                continue
            log.warning("worqr: giving back task %s, handed to us but never received", task_id)
            self.given_back.append(key)
            give_back[q].append((task_id, key[1], False))
        for q, items in give_back.items():
            try:
                await commands.stop(q, w.name, items).arun(w.redis)
            except NETWORK_ERRORS:
                self.stock_needed = True

    # -- hand-overs ------------------------------------------------------------------------

    def on_handed(self, data):
        """A task handed straight to us by an enqueue: run it, or give it back if we can't."""
        w = self.w
        task = commands.task_from_handover(data)
        queue = task.queue
        key = (task.id, task.lease)
        if key in self.given_back or key in w.deliveries:
            return
        self.idle_in.discard(queue)
        if queue not in w.specs or w.stopping or not w.registered or w.free_slots() <= 0:
            self.given_back.append(key)
            asyncio.ensure_future(self._give_back(queue, task.id, task.lease))
            return
        d = processor.Delivery(task, w.spec_for(queue, task))
        d.handed = True  # an idle worker's pickup: its start goes first (processor._launch)
        w.start_delivery(d)
        w.changed.set()  # still free slots? the fetcher looks for more (and goes idle again)

    async def _give_back(self, queue, task_id, lease):
        try:
            await commands.stop(queue, self.w.name, [(task_id, lease, False)]).arun(self.w.redis)
        except NETWORK_ERRORS:  # best effort: taking stock after reconnecting gives it back
            self.stock_needed = True

    def on_wake(self, queue):
        """Work is there: look for it, or pass the news on to another idle worker if full."""
        self.idle_in.discard(queue)
        if self.w.free_slots() > 0 and not self.w.stopping:
            self.w.changed.set()
        elif queue in self.w.specs:
            asyncio.ensure_future(self._pass_wake(queue))

    async def _pass_wake(self, queue):
        try:
            await commands.wake(queue, 1).arun(self.w.redis)
        except NETWORK_ERRORS:  # best effort: the reaper and taking stock cover a miss
            pass
