"""Fetcher: gets work for a worker's free slots, and takes stock of what it holds.

1. Waits for the control channel's first subscription, so no hand-over or cancel is missed.
2. Each round: sends the lock releases due, takes stock if asked (after every (re)subscribe or a
   lost reply), then asks each queue in priority order for as many tasks as there are free
   slots, acknowledging finished tasks in the same ``start`` call.
3. When that leaves slots free, the worker is in every queue's idle set (``start`` put it there
   atomically) and the fetcher sleeps until something changes (a wake-up, a hand-over, a slot
   freed, an acknowledgement to send) or the next delayed task is due. No polling for work: it
   only checks, every HEARTBEAT_INTERVAL, that Redis still lists it in those idle sets. One that
   drops it without a message reaching it (a failover that lost the write putting it there, a
   wake-up or hand-over lost on the way) would leave it asleep while tasks wait; twice unlisted,
   it takes stock and looks for work (``start`` lists it again).
4. Tasks handed straight to the worker over its control channel are run at once, or given back
   to the front of their queue when the worker can't take them.

What it takes goes into the worker's ``Deliveries`` and is started with ``run(delivery)`` (the
processor's); acknowledgements and releases come from the ``Reporter``. It is given the
``Capsule`` (name, queues in priority order, handlers, settings), the ``Status`` (stopping,
registered, the events it waits on) and two callbacks: ``beat_soon()`` (``start`` refused us as
late) and ``on_lost(queues)`` (we were presumed dead there).
"""

import asyncio
import logging
import time
from collections import defaultdict, deque

from .. import commands, faults, keys
from ..backoff import Backoff, wait_event
from ..codes import Code
from ..connection import NETWORK_ERRORS, raise_if_cancelling
from .delivery import Delivery

log = logging.getLogger("worqr.worker")

#: The most tasks one ``start`` call takes for a queue of one-task handlers (a worker with more
#: free slots calls again at once): every call's work stays bounded. A chunk queue's call takes
#: its chunks (at most ``registry.MAX_CHUNK`` tasks).
MAX_TAKE = 64
#: Loop turns the fetcher of a busy worker lets pass before it sends its next batch.
BATCH_TURNS = 3


class Fetcher:
    def __init__(self, capsule, status, deliveries, reporter, redis, *, chunks, run, beat_soon, on_lost):
        self.capsule, self.config, self.status = capsule, capsule.config, status
        self.chunks = chunks  # chunks.Chunker: how many tasks a chunk queue is asked for
        self.deliveries, self.reporter, self.redis = deliveries, reporter, redis
        self.run_delivery, self.beat_soon, self.on_lost = run, beat_soon, on_lost
        self.idle_in = set()  # queues whose idle set we are in (start put us there)
        self.unlisted = set()  # queues of idle_in whose idle set did not list us at the last check
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
        self.unlisted.clear()

    # -- the loop --------------------------------------------------------------------------

    async def run(self):
        status, deliveries, reporter = self.status, self.deliveries, self.reporter
        await asyncio.wait(
            [asyncio.ensure_future(e.wait()) for e in (status.subscribed, status.stopped)],
            return_when=asyncio.FIRST_COMPLETED,
        )
        backoff, failing = Backoff(), False
        fault = faults.active("fetch-yield-sigterm")
        while True:
            if deliveries:
                # Let completions that are already due land: bigger batches. An async handler
                # that returns at once needs three loop turns (its first step, its task's done
                # callback, the report).
                for _ in range(BATCH_TURNS):
                    await asyncio.sleep(0)
                if fault:
                    await faults.sigterm_once("fetch-yield-sigterm", lambda: status.stopping)
            # Look at ``stopping`` only now, with no await before the clear: a stop that came
            # during the yield above was cleared with ``changed`` and the fetcher slept on, its
            # task running, until something else changed (a supervisor's SIGTERM seen ignored).
            if status.stopping:
                break
            status.changed.clear()
            acks, behind = {}, {}
            try:
                await reporter.send_releases()
                if self.stock_needed:
                    await self.take_stock()
                free = 0 if status.quiet else deliveries.free_slots()  # quiet: acknowledge, take nothing
                acks, behind = reporter.take_acks()
                if free <= 0 and not acks:
                    await wait_event(status.changed, None if status.registered else 1.0)
                    continue
                try:
                    taken, due_ms, more, used = await self._fetch(free, acks, behind)
                finally:
                    reporter.put_back(behind)  # what was not sent goes with the next batch
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
                await backoff.wait(status.stopped)
                continue
            for d in taken:
                self._start(d)
            if 0 < free and used < free and not more and not reporter.acks and not reporter.releases:
                await self._sleep_idle(due_ms)

    async def _sleep_idle(self, due_ms):
        """Sleep until something changes or the next delayed task is due (``due_ms``, -1: none),
        checking every HEARTBEAT_INTERVAL that Redis still lists us as idle; returns at once
        when it twice did not (the loop then takes stock and looks for work)."""
        status, every = self.status, self.config.heartbeat_interval
        until = None if due_ms < 0 else time.monotonic() + due_ms / 1000
        while True:
            left = every if until is None else min(every, until - time.monotonic())
            if left > 0:
                await wait_event(status.changed, left)
            if left <= 0 or status.changed.is_set() or (until is not None and time.monotonic() >= until):
                return
            if await self._forgotten():
                return

    async def _forgotten(self):
        """Whether a queue's idle set has not listed us at two checks in a row while we wait in it
        (one miss may be a wake-up or hand-over on its way). Then we take stock (a task handed
        to us whose message was lost goes back) and the loop looks for work."""
        queues = [q for q in self.capsule.queues if q in self.idle_in]
        if not queues or self.status.stopping or not self.status.registered:
            self.unlisted.clear()
            return False
        p = self.redis.pipeline(transaction=False)
        for q in queues:
            p.sismember(keys.queue_key(q, "idle"), self.capsule.name)
        try:
            listed = await p.execute()
        except NETWORK_ERRORS:  # the heartbeat says when Redis is out of reach; checked again later
            raise_if_cancelling()
            return False
        # a queue left meanwhile (a hand-over or wake-up came) is not judged
        missing = {q for q, yes in zip(queues, listed) if not yes and q in self.idle_in}
        forgotten, self.unlisted = missing & self.unlisted, missing
        if not forgotten:
            return False
        log.warning(
            "worqr: worker %s was no longer listed as idle in %s (a failover lost the write, or a "
            "wake-up was lost); looking for work",
            self.capsule.name,
            ", ".join(sorted(forgotten)),
        )
        self.idle_in -= forgotten
        self.unlisted -= forgotten
        self.stock_needed = True
        return True

    def _start(self, d):
        self.deliveries.add(d)
        self.run_delivery(d)

    async def _fetch(self, free, acks, behind):
        """Acknowledge ``acks`` and take up to ``free`` tasks, queue by queue in priority order.
        Returns (deliveries, ms until the next due task or -1, whether to look again at once, the
        slots they fill: one per task, or per chunk of a chunk queue).
        The deliveries behind each batch sent are removed from ``behind``."""
        cap, c = self.capsule, self.config
        taken, due_ms, more = [], -1, False
        used = 0  # slots filled: one per task, or per chunk of a chunk queue
        for q in cap.queues:
            chunked = bool(cap.specs[q].chunk)
            room = free - used - self.chunks.partials(but=q)  # a partial chunk of another queue keeps its slot
            want = self.chunks.want(q, room) if chunked else min(room, MAX_TAKE)
            more = more or (not chunked and room > MAX_TAKE)
            batch = acks.pop(q, [])
            if want <= 0 and not batch:
                continue
            spec = cap.specs[q]
            call = commands.start(
                q,
                cap.name,
                max(want, 0),
                lock_ttl=c.lock_ttl,
                grace=cap.timeout_grace(q),
                default_timeout=spec.timeout,
                result_ttl=c.result_ttl,
                acks=batch,
            )
            asked = time.monotonic()  # a rate-limited queue's handlers start within its grace of it
            reply = await call.arun(self.redis)
            if batch:
                self.reporter.check_codes([d for d, _ in behind.pop(q)], reply.codes)
            if want <= 0:
                continue
            if reply.status == Code.NOT_REGISTERED:
                self.on_lost([q])
                return taken, -1, False, used
            if reply.status == Code.LATE:
                # Our deadline has passed (beats failed): the next beat of another worker may
                # reap us and run again what we took. Take nothing until we have beaten.
                log.warning(
                    "worqr: worker %s is late in %s (its deadline passed): beating before taking more", cap.name, q
                )
                self.beat_soon()
                return taken, -1, False, used
            if reply.due_in_ms >= 0:
                due_ms = reply.due_in_ms if due_ms < 0 else min(due_ms, reply.due_in_ms)
            start_by = asked + reply.grace_ms / 1000 if reply.grace_ms else None
            used += self.chunks.slots_for(q, len(reply.tasks)) if chunked else len(reply.tasks)
            for task in reply.tasks:
                taken.append(Delivery(task, cap.spec_for(q, task), start_by=start_by))
            more = more or reply.status == Code.MORE
            if len(reply.tasks) < want and reply.status != Code.MORE:
                self.idle_in.add(q)
            else:
                self.idle_in.discard(q)
        if free and used >= free and self.idle_in:
            # Full: leave the idle sets of the queues we did not get to, so wake-ups go to others.
            p = self.redis.pipeline(transaction=False)
            for q in self.idle_in:
                p.srem(keys.queue_key(q, "idle"), cap.name)
            await p.execute()
            self.idle_in.clear()
        return taken, due_ms, more, used

    # -- taking stock ----------------------------------------------------------------------

    async def take_stock(self):
        """Compare what Redis says this worker holds with what it runs: give back to the front
        the tasks it holds but never received (a hand-over lost while disconnected), and stop
        the tasks it runs that were cancelled while it was not listening. What is decided is
        decided without awaiting, so a hand-over arriving meanwhile can't be given back too."""
        cap, r = self.capsule, self.redis
        self.stock_needed = False  # set again if a give-back fails
        p = r.pipeline(transaction=False)
        for q in cap.queues:
            p.smembers(keys.worker_tasks_key(q, cap.name))
        held = [(q, raw.decode()) for q, ids in zip(cap.queues, await p.execute()) for raw in ids]
        p = r.pipeline(transaction=False)
        for q, task_id in held:
            p.hmget(keys.task_key(q, task_id), "l", "s", "w", "x")
        rows = await p.execute() if held else []
        give_back = defaultdict(list)
        pending_acks = self.reporter.pending_keys()
        for (q, task_id), (lease, state, holder, cancel) in zip(held, rows):
            if lease is None or state != b"active" or holder != cap.name.encode():
                continue
            key = (task_id, int(lease))
            d = self.deliveries.get(key)
            if d is not None:
                if cancel is not None and not d.task.cancelled:
                    log.info("worqr: task %s was cancelled while we were not listening; stopping it", task_id)
                    self.deliveries.cancel(d)
                continue
            if key in pending_acks:
                continue
            log.warning("worqr: giving back task %s, handed to us but never received", task_id)
            self.given_back.append(key)
            give_back[q].append((task_id, key[1], False))
        for q, items in give_back.items():
            try:
                await commands.stop(q, cap.name, items).arun(r)
            except NETWORK_ERRORS:
                self.stock_needed = True

    # -- hand-overs ------------------------------------------------------------------------

    def on_handed(self, data):
        """A task handed straight to us by an enqueue: run it, or give it back if we can't."""
        cap, status = self.capsule, self.status
        task = commands.task_from_handover(data)
        queue = task.queue
        key = (task.id, task.lease)
        if key in self.given_back or key in self.deliveries:
            return
        self.idle_in.discard(queue)
        if (
            queue not in cap.specs
            or status.stopping
            or status.quiet
            or not status.registered
            or not self._room_for(queue, cap.spec_for(queue, task))
        ):
            self.given_back.append(key)
            asyncio.ensure_future(self._give_back(queue, task.id, task.lease))
            return
        # handed: an idle worker's pickup, its start goes first (``Processor._launch``)
        self._start(Delivery(task, cap.spec_for(queue, task), handed=True))
        status.poke()  # still free slots? the fetcher looks for more (and goes idle again)

    def _room_for(self, queue, spec):
        """Whether a task of ``queue`` (run by ``spec``) has a slot here: a free one not kept for
        another queue's partial chunk, or its own queue's partial chunk to join."""
        if spec.chunk and self.chunks.filling(queue):
            return True
        return self.deliveries.free_slots() - self.chunks.partials(but=queue) > 0

    async def leave_idle_sets(self):
        """Gone quiet: leave every queue's idle set, so enqueues hand their tasks to other workers."""
        p = self.redis.pipeline(transaction=False)
        for q in self.capsule.queues:
            p.srem(keys.queue_key(q, "idle"), self.capsule.name)
        self.idle_in.clear()
        try:
            await p.execute()
        except NETWORK_ERRORS:  # best effort: a hand-over that still comes is given back
            pass

    async def _give_back(self, queue, task_id, lease):
        try:
            await commands.stop(queue, self.capsule.name, [(task_id, lease, False)]).arun(self.redis)
        except NETWORK_ERRORS:  # best effort: taking stock after reconnecting gives it back
            self.stock_needed = True

    def on_wake(self, queue):
        """Work is there: look for it, or pass the news on to another idle worker if there is no
        slot for it here (none free, or the one left kept for another queue's partial chunk)."""
        self.idle_in.discard(queue)
        spec = self.capsule.specs.get(queue)
        room = self._room_for(queue, spec) if spec is not None else self.deliveries.free_slots() > 0
        if room and not self.status.stopping and not self.status.quiet:
            self.status.poke()
        elif spec is not None:
            asyncio.ensure_future(self._pass_wake(queue))

    async def _pass_wake(self, queue):
        try:
            await commands.wake(queue, 1).arun(self.redis)
        except NETWORK_ERRORS:  # best effort: the reaper and taking stock cover a miss
            pass
