"""Worker: serves queues in priority order with N slots.

1. Register: the heartbeat key (TTL), the worker registry, and each queue's worker set.
2. Listen on the worker's control channel (``control.Listener``).
3. Beat every HEARTBEAT_INTERVAL: refresh the key and, per queue, the deadline (which also reaps
   dead workers and stuck tasks). A lost registration stops the running tasks and registers anew.
4. Fetch: with free slots, ask each queue in order for that many tasks; when that leaves slots
   free the worker is in every queue's idle set and sleeps until woken, a slot frees, or the next
   delayed task is due. No polling.
5. Acknowledge finished tasks in batches, one script call per queue.
6. On stop: take no more work, let running tasks finish for up to ``grace`` seconds, give the
   rest back to the front of their queues, deregister.
"""

import asyncio
import json
import logging
import os
import random
import signal
import socket
import time
from collections import deque
from dataclasses import replace
from datetime import UTC, datetime

from .. import keys, scripts
from ..connection import NETWORK_ERRORS
from ..errors import NoHandler
from ..registry import get_handler
from ..task import Task, decode_payload
from . import processor
from .control import Listener
from .pool import ThreadPool
from .reporter import Reporter, _default

log = logging.getLogger("worqr.worker")


def default_name():
    return f"{socket.gethostname()}.{os.getpid()}.{os.urandom(3).hex()}"


class Worker:
    def __init__(self, queues, connection, *, concurrency=1, name=None, grace=30.0, callback_handler=None):
        """``callback_handler`` (a HandlerSpec) runs tasks that carry a callback URL; with it, a
        queue without a handler of its own may be served (for such tasks only)."""
        if not queues:
            raise NoHandler("no queue to serve: give queue names or register handlers")
        self.queues = [keys.check_queue_name(q) for q in queues]
        self.callback_handler = callback_handler
        self.specs = {}
        for q in self.queues:
            spec = get_handler(q)
            if spec is None and callback_handler is None:
                raise NoHandler(f"queue {q!r} has no handler: define one with @handler({q!r})")
            self.specs[q] = spec or _no_handler_spec(q, callback_handler)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError("concurrency must be an integer >= 1")
        self.connection, self.config = connection, connection.config
        self.concurrency = concurrency
        self.name = keys.check_worker_name(name or default_name())
        self.grace = grace
        self.running = {}
        self.idle_in = set()
        self.stopping = False
        self.registered = False
        self.reconcile = False
        #: (id, lease) of deliveries given back unstarted: a late hand-over of one is ignored
        self.given_back = deque(maxlen=1000)
        self.processed = self.failed = 0
        self.started_at = datetime.now(UTC).isoformat()
        self.exit_code = 0

    # -- lifecycle -------------------------------------------------------------------------

    def run(self):
        """Serve until SIGTERM/SIGINT; returns the exit code."""
        asyncio.run(self.main())
        return self.exit_code

    def request_stop(self, *_):
        if self.stopping:
            log.warning("worqr: second stop signal: giving running tasks back now")
            self.grace = 0
        self.stopping = True
        self.stop_event.set()
        self.kick.set()
        self.slot_freed.set()

    async def main(self):
        self.loop = asyncio.get_running_loop()
        self.kick, self.slot_freed = asyncio.Event(), asyncio.Event()
        self.reporter = Reporter(self)
        self.stop_event = asyncio.Event()
        self.pool = ThreadPool(self.concurrency)
        self.redis = self.connection.async_client(max_connections=self.concurrency + 8)
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.loop.add_signal_handler(sig, self.request_stop)
            except (NotImplementedError, RuntimeError):  # not the main thread (tests)
                pass
        await self._register_until_done()
        listener = Listener(self.redis, keys.worker_channel(self.name), self._on_control, self._on_subscribed)
        helpers = [asyncio.ensure_future(c) for c in (listener.run(), self._beat_loop())]
        log.info("worqr: worker %s serving %s with %d slot(s)", self.name, ", ".join(self.queues), self.concurrency)
        try:
            await self._fetch_loop()
            await self._shutdown()
        finally:
            for h in helpers:
                h.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            self.pool.shutdown()
            await self.redis.aclose()
        log.info("worqr: worker %s stopped", self.name)

    async def _register_until_done(self):
        backoff = 0.05
        while not self.stopping:
            try:
                await self._register()
                return
            except NETWORK_ERRORS as exc:
                log.warning("worqr: cannot register (%s); retrying in %.1f s", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _info(self):
        return json.dumps({
            "host": socket.gethostname(), "pid": os.getpid(), "queues": self.queues,
            "concurrency": self.concurrency, "started_at": self.started_at,
            "processed": self.processed, "failed": self.failed, "active": len(self.running),
            "ttl_ms": self._ttl_ms,
        })

    @property
    def _ttl_ms(self):
        return int(self.config.heartbeat_ttl * 1000)

    async def _register(self):
        r = self.redis
        await r.set(keys.heartbeat_key(self.name), self._info(), px=self._ttl_ms)
        await r.sadd(keys.WORKER_REGISTRY, self.name)
        c = self.config
        for q in self.queues:
            await scripts.arun(r, "register", q, self.name, self._ttl_ms, int(c.lock_ttl * 1000),
                               int(c.timeout_grace * 1000), _default(self.specs[q].timeout, 0))
            await r.sadd(keys.KNOWN_QUEUES, q)
        self.registered = True
        self.last_beat = time.monotonic()
        self.idle_in.clear()
        self.kick.set()
        self.slot_freed.set()

    # -- heartbeat -------------------------------------------------------------------------

    async def _beat_loop(self):
        c = self.config
        while True:
            await asyncio.sleep(c.heartbeat_interval)
            if not self.registered:
                await self._register_until_done()
                continue
            try:
                key_alive = await self.redis.set(keys.heartbeat_key(self.name), self._info(), px=self._ttl_ms, xx=True)
                reaped = []
                for q in self.queues:
                    spec = self.specs[q]
                    reply = await scripts.arun(
                        self.redis, "heartbeat", q, self.name, self._ttl_ms, int(c.lock_ttl * 1000),
                        _default(spec.retries, c.retries), _default(spec.backoff, c.backoff),
                        c.backoff_max, random.random() * c.backoff_jitter, c.failure_history,
                    )
                    if reply[0] == -1:
                        reaped.append(q)
                if not reaped:
                    self.last_beat = time.monotonic()
            except NETWORK_ERRORS as exc:
                log.warning("worqr: heartbeat failed: %s", exc)
                continue
            if reaped:
                self._reaped(reaped)
            if (reaped or not key_alive) and not self.stopping:
                log.warning("worqr: worker %s found its registration gone; registering again", self.name)
                self.registered = False
                await self._register_until_done()

    def _reaped(self, queues):
        """We were presumed dead in ``queues``: our tasks there went back to the queue and may
        already run elsewhere. Ask them to stop; their leases are void, so whatever they report
        is refused by Redis."""
        self.registered = False
        for d in self.running.values():
            if d.task.queue in queues:
                log.warning("worqr: task %s was taken from this worker (presumed dead); stopping it", d.task.id)
                d.cancel_locally()

    # -- fetching --------------------------------------------------------------------------

    async def _fetch_loop(self):
        backoff = 0.05
        while not self.stopping:
            if self.running:
                await asyncio.sleep(0)  # let completions that are already due land: bigger batches
            free = self.concurrency - len(self.running) if self.registered else 0
            if free <= 0 and not self.reporter.acks:
                self.slot_freed.clear()
                await _wait(self.slot_freed, 1.0 if not self.registered else None)
                continue
            self.kick.clear()
            acks = self.reporter.take_acks()
            try:
                if self.reconcile:
                    await self._reconcile(acks)
                taken, wait_ms = await self._fetch(max(free, 0), acks)
                backoff = 0.05
            except NETWORK_ERRORS as exc:
                # The call may have run with its reply lost: acknowledgements are sent again
                # (a repeat is refused as stale, harmlessly) and tasks held in Redis but unknown
                # here would be stranded, so compare and give those back.
                self.reporter.put_back(acks)
                self.reconcile = True
                log.warning("worqr: fetch failed (%s); retrying in %.1f s", exc, backoff)
                await _wait(self.stop_event, backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            for d in taken:
                self.running[d.task.id] = d
                d.runner = asyncio.ensure_future(processor.run(self, d))
            if 0 < free and len(taken) < free and not self.reporter.acks:
                await _wait(self.kick, None if wait_ms < 0 else wait_ms / 1000)

    async def _fetch(self, free, acks):
        """Acknowledge ``acks`` and take up to ``free`` tasks, queue by queue in priority order."""
        taken, wait_ms = [], -1
        c = self.config
        ttl_ms = int(c.result_ttl * 1000)
        for q in self.queues:
            want = free - len(taken)
            batch = acks.get(q, [])
            if want <= 0 and not batch:
                continue
            spec = self.specs[q]
            reply = await scripts.arun(
                self.redis, "start", q, self.name, want, int(c.lock_ttl * 1000),
                int(c.timeout_grace * 1000), _default(spec.timeout, 0), len(batch), ttl_ms,
                *(x for triple in batch for x in triple),
            )
            if batch:  # sent: off the list (a failed call leaves it there, to be put back)
                acks.pop(q)
                self.reporter.check_codes(batch, reply[len(reply) - len(batch):])
                reply = reply[:len(reply) - len(batch)]
            if want <= 0:
                continue
            if reply[0] == -1:
                self._reaped([q])
                self.reporter.put_back(acks)  # those of the queues not reached yet
                return taken, -1
            if reply[1] >= 0:
                wait_ms = reply[1] if wait_ms < 0 else min(wait_ms, reply[1])
            fields = reply[2:]
            for i in range(0, len(fields), 9):
                task = _task_from(q, fields[i:i + 9])
                use = self.callback_handler if task.callback and self.callback_handler else spec
                taken.append(processor.Delivery(task, use))
            if len(fields) // 9 < want:
                self.idle_in.add(q)
            else:
                self.idle_in.discard(q)
        if free and len(taken) >= free and self.idle_in:
            # Full: leave the idle sets of the queues we did not get to, so wake-ups go to others.
            p = self.redis.pipeline(transaction=False)
            for q in self.idle_in:
                p.srem(keys.queue_key(q, "idle"), self.name)
            await p.execute()
            self.idle_in.clear()
        return taken, wait_ms

    async def _reconcile(self, acks):
        """Give back to the front of their queues the tasks Redis says we hold but we neither
        run nor are about to acknowledge (``acks``)."""
        self.reconcile = False  # set again if a give-back fails
        known = set(self.running) | {t[0] for batch in acks.values() for t in batch}
        known |= {t[0] for batch in self.reporter.acks.values() for t in batch}
        for q in self.queues:
            held = await self.redis.smembers(keys.worker_tasks_key(q, self.name))
            for raw in held:
                task_id = raw.decode()
                if task_id in known:
                    continue
                lease = await self.redis.hget(keys.task_key(q, task_id), "l")
                if lease is not None:
                    log.warning("worqr: giving back task %s, handed to us but never received", task_id)
                    await self._give_back(q, task_id, int(lease))

    async def still_holds(self, task):
        """Whether Redis still has ``task`` active on this worker under the same lease."""
        try:
            lease, state, worker = await self.redis.hmget(keys.task_key(task.queue, task.id), "l", "s", "w")
        except NETWORK_ERRORS:
            return True  # can't tell: run it; the lease still fences its outcome
        return state == b"active" and worker == self.name.encode() and lease is not None and int(lease) == task.lease

    def _on_subscribed(self):
        """After every (re)subscribe: check the queues, and take stock of what we hold (a task
        handed to us while we were not listening would otherwise be stranded)."""
        self.reconcile = True
        self.kick.set()
        self.slot_freed.set()

    def _on_handed(self, data):
        """A task handed straight to us by an enqueue: run it, or give it back if we can't."""
        header, _, body = data.partition(b"\n")
        queue = header[2:].decode()
        fields, i = [], 0
        while i < len(body):
            colon = body.index(b":", i)
            size = int(body[i:colon])
            fields.append(body[colon + 1:colon + 1 + size])
            i = colon + 1 + size
        task = _task_from(queue, fields)
        if (task.id, task.lease) in self.given_back or task.id in self.running:
            return
        self.idle_in.discard(queue)
        spec = self.specs.get(queue)
        if spec is None or self.stopping or not self.registered or len(self.running) >= self.concurrency:
            asyncio.ensure_future(self._give_back(queue, task.id, task.lease))
            return
        use = self.callback_handler if task.callback and self.callback_handler else spec
        d = processor.Delivery(task, use)
        self.running[task.id] = d
        d.runner = asyncio.ensure_future(processor.run(self, d))
        self.kick.set()  # still free slots? the fetch loop looks for more (and goes idle again)

    async def _give_back(self, queue, task_id, lease):
        self.given_back.append((task_id, int(lease)))
        try:
            await scripts.arun(self.redis, "stop", queue, self.name, 1, task_id, int(lease))
        except NETWORK_ERRORS:  # best effort: the reconcile after reconnecting gives it back
            self.reconcile = True

    def _on_control(self, data):
        if data.startswith(b"t "):
            self._on_handed(data)
            return
        kind, _, rest = data.decode("utf-8", "replace").partition(" ")
        if kind == "w":
            self.idle_in.discard(rest)
            if self.concurrency - len(self.running) > 0 and not self.stopping:
                self.kick.set()
            elif rest in self.specs:  # full: pass the wake-up on to another idle worker
                asyncio.ensure_future(self._pass_wake(rest))
        elif kind == "d":
            self.kick.set()
        elif kind == "c":
            queue, _, task_id = rest.partition(" ")
            d = self.running.get(task_id)
            if d is not None and not d.reported:
                log.info("worqr: cancelling task %s of %s", task_id, queue)
                d.cancel_locally()
                if not d.is_async:  # a thread can't be stopped: report it now, discard its result
                    d.reported = True
                    self.reporter.done(d, "cancelled", "")

    async def _pass_wake(self, queue):
        try:
            await scripts.arun(self.redis, "wake", queue, 1)
        except NETWORK_ERRORS:  # best effort: the reaper and resubscribe checks cover a miss
            pass

    # -- outcomes --------------------------------------------------------------------------

    def delivery_done(self, d):
        self.running.pop(d.task.id, None)
        self.slot_freed.set()
        self.kick.set()

    # -- shutdown --------------------------------------------------------------------------

    async def _shutdown(self):
        deadline = time.monotonic() + self.grace
        if self.running:
            log.info("worqr: stopping: waiting up to %.0f s for %d task(s)", self.grace, len(self.running))
        while self.running and time.monotonic() < deadline:
            self.slot_freed.clear()
            await _wait(self.slot_freed, max(0.0, deadline - time.monotonic()))
            await self.reporter.flush()
        left = [d for d in self.running.values() if not d.reported]
        for d in left:
            d.stopping = True
            if d.is_async:
                d.handle.cancel()
            else:
                d.reported = True
                await self.reporter.stop(d)
        runners = [d.runner for d in left if d.is_async and d.runner is not None]
        if runners:
            await asyncio.wait(runners, timeout=2.0)
        await self.reporter.flush()
        try:
            for q in self.queues:
                await scripts.arun(self.redis, "unregister", q, self.name, "worker_left")
            await self.redis.delete(keys.heartbeat_key(self.name))
            await self.redis.srem(keys.WORKER_REGISTRY, self.name)
        except NETWORK_ERRORS as exc:
            log.error("worqr: could not deregister (%s); the reaper will recover our tasks", exc)


def _no_handler_spec(queue, callback_handler):
    """The spec of a queue served only for callback tasks: its other tasks fail clearly."""

    def no_handler(task):
        raise NoHandler(f"queue {queue!r} has no handler and task {task.id} has no callback")

    return replace(callback_handler, queue=queue, func=no_handler, is_async=False)


async def _wait(event, timeout):
    if timeout is None:
        await event.wait()
        return
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        pass


def _task_from(queue, f):
    task_id, payload, lease, attempt, timeout, callback, meta, retries, kind = f
    timeout = float(timeout or 0)
    return Task(
        id=task_id.decode(), queue=queue, payload=decode_payload(payload, kind), state="active",
        attempt=int(attempt), lease=int(lease), timeout=timeout if timeout > 0 else None,
        callback=callback.decode() or None, meta=meta.decode() or None,
        retries=int(retries) if retries else None,
    )
