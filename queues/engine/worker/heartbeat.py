"""Heart: a worker's registration and heartbeat.

1. Register: the heartbeat key (TTL), which also claims the worker's name (a name held by a
   live worker is refused), the worker registry, and each queue's worker set.
2. Beat every HEARTBEAT_INTERVAL: refresh the key and, per queue, the deadline (which also reaps
   dead workers, recovers stuck tasks and keeps locks alive). A failed beat is sent again at once
   and then every RETRY_MAX at most, until one gets through; ``start`` refusing the worker as
   late (its deadline passed) asks for a beat at once (``beat_soon``).
3. A lost registration (reaped while unresponsive, or a heartbeat key that Redis lost) stops the
   tasks that were taken back and registers anew.

The reaper (heartbeat.lua) judges deadlines only by time the workers could beat in: after a gap
in a queue's beats (Redis down, or cut off from every worker), every worker of the queue has a
full HEARTBEAT_TTL to beat again. So a worker that could not beat for longer than the TTL goes
on with its tasks: its first beat tells it whether it was reaped meanwhile (only if other workers
of the queue were beating), and only then are those tasks stopped.
"""

import asyncio
import json
import logging
import os
import random
import socket
import time

import redis

from .. import commands, faults, history, keys, scripts, upkeep
from ..backoff import Backoff, wait_event
from ..codes import Code
from ..connection import NETWORK_ERRORS, raise_if_cancelling
from ..errors import WorkerNameTaken
from ..sweep import Sweep
from .child import rss_mb
from .reporter import default

log = logging.getLogger("worqr.worker")

#: Seconds between two depth samples of a worker (twice a minute: one per minute is kept).
DEPTH_EVERY = 30.0
#: A failed beat is sent again at once, then after RETRY_FIRST seconds doubling to RETRY_MAX:
#: after an outage, every worker beats within RETRY_MAX of Redis answering again (well within
#: the HEARTBEAT_TTL a worker has then: heartbeat.lua).
RETRY_FIRST, RETRY_MAX = 0.05, 0.5


class Heart:
    def __init__(self, worker):
        self.w = worker
        self.instance = os.urandom(8).hex()  # tells this process from another of the same name
        self.last_beat = time.monotonic()
        self.registered_once = False
        self._cpu_mark = (time.monotonic(), _cpu_seconds())
        self.sampled_at = 0.0  # when the queues' depth was last sampled (monotonic)
        self.side = None  # the beats' side work under way (``_side``), an asyncio task
        self.reaped_seen = False  # workers were reaped: the gone ones are to be noted
        self.gone_checked_at = 0.0  # when the registry was last checked for dead workers (monotonic)
        self.pruner = history.Pruner(worker.config.retention)  # prunes the record of ended tasks
        self.sweep = Sweep(worker.name, worker.config)  # the queue sweep (one worker at a time)
        self.wake = asyncio.Event()  # beat now (``beat_soon``)
        self.asked = False  # a beat was asked for: tell the worker when one got through

    @property
    def ttl(self):
        return self.w.config.heartbeat_ttl

    def unresponsive(self):
        """Whether the last successful beat is older than the TTL (we may have been reaped)."""
        return time.monotonic() - self.last_beat > self.ttl

    def _info(self):
        w = self.w
        return json.dumps(
            {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "pidns": _PID_NAMESPACE,
                "queues": w.queues,
                "concurrency": w.concurrency,
                "started_at": w.started_at,
                "instance": self.instance,
                "processed": w.reporter.processed,
                "failed": w.reporter.failed,
                "active": len(w.deliveries),
                "ttl_ms": int(self.ttl * 1000),
                "rss_mb": round(rss_mb(), 1),
                "cpu": self._cpu_percent(),
            }
        )

    def _cpu_percent(self):
        """The process's CPU use since the last beat, in percent of one core."""
        now, used = time.monotonic(), _cpu_seconds()
        then, before = self._cpu_mark
        self._cpu_mark = (now, used)
        return round(100 * (used - before) / (now - then), 1) if now - then > 0.05 else 0.0

    def gone_entry(self, how):
        """What the list of gone workers keeps about this one (``keys.GONE_WORKERS``)."""
        w = self.w
        return {
            "name": w.name,
            "how": how,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": w.queues,
            "concurrency": w.concurrency,
            "started_at": w.started_at,
            "processed": w.reporter.processed,
            "failed": w.reporter.failed,
        }

    # -- registration ----------------------------------------------------------------------

    async def register_until_done(self):
        backoff = Backoff()
        while not self.w.stopping:
            try:
                await self._register()
                return
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                log.warning("worqr: cannot register (%s); retrying", exc)
                await backoff.wait()

    async def _claim_name(self):
        """Set the heartbeat key if the name is free or ours. A name whose holder died is free
        once its key expires (within the TTL): wait that long, no longer; a holder that ran on this
        host under a pid that no longer exists is known dead at once (a restart)."""
        r, key, ttl_ms = self.w.redis, keys.heartbeat_key(self.w.name), int(self.ttl * 1000)
        deadline = time.monotonic() + self.ttl + 0.5
        while True:
            if await r.set(key, self._info(), px=ttl_ms, nx=True):
                return
            raw = await r.get(key)
            holder = json.loads(raw) if raw is not None else {}
            if raw is not None and (holder.get("instance") == self.instance or _dead_here(holder)):
                if await self._take_over(key, raw, ttl_ms):
                    return
                continue
            if time.monotonic() > deadline:
                raise WorkerNameTaken(
                    f"a live worker named {self.w.name!r} is already running: give this one another --name"
                )
            await asyncio.sleep(0.1)

    async def _take_over(self, key, seen, ttl_ms):
        """Replace the heartbeat key if it still holds ``seen`` (another process may be taking
        the same name over at the same moment: only one wins)."""
        async with self.w.redis.pipeline(transaction=True) as p:
            try:
                await p.watch(key)
                if await p.get(key) != seen:
                    return False
                p.multi()
                p.set(key, self._info(), px=ttl_ms)
                await p.execute()
                return True
            except redis.WatchError:
                return False

    async def _register(self):
        w, c = self.w, self.w.config
        await self._claim_name()
        await w.redis.sadd(keys.WORKER_REGISTRY, w.name)
        for q in w.queues:
            back = await commands.register(
                q,
                w.name,
                ttl=c.heartbeat_ttl,
                lock_ttl=c.lock_ttl,
                grace=c.timeout_grace,
                default_timeout=w.specs[q].timeout,
                fresh=not self.registered_once,
                limits=w.specs[q].limits,
                interval=c.heartbeat_interval,
            ).arun(w.redis)
            if back:
                log.warning("worqr: %d task(s) of an earlier worker named %s went back to %s", back, w.name, q)
            await w.redis.sadd(keys.KNOWN_QUEUES, q)
        self.registered_once = True
        self.last_beat = time.monotonic()
        w.registration_done()

    # -- beating ---------------------------------------------------------------------------

    def beat_soon(self):
        """Beat now rather than at the next interval, and tell the worker (``changed``) once a
        beat got through: ``start`` refused us as late (our deadline had passed)."""
        self.asked = True
        self.wake.set()

    async def run(self):
        """Beat until cancelled, on a client of its own (one connection kept open): a beat never
        waits for the pool's connections, nor for a new one, which through Sentinel means asking
        the Sentinels where the master is (seconds, if they are slow or cut off: the key would
        expire and the worker be presumed dead while it runs its tasks). Its connects and replies
        may take HEARTBEAT_TTL - HEARTBEAT_INTERVAL (at least 1 s): a beat stuck on a link that
        died silently is sent again on a new one while there is still time."""
        c = self.w.config
        timeout = max(1.0, c.heartbeat_ttl - c.heartbeat_interval)
        client = self.w.connection.async_client(max_connections=2, timeout=timeout)
        try:
            await self._beat(client)
        finally:
            await client.aclose()

    async def _beat(self, r):
        """Beat every HEARTBEAT_INTERVAL; a beat that fails is sent again at once (on a new
        connection: the pool drops the one that failed), then after pauses of 50 ms doubling
        to RETRY_MAX while Redis stays out of reach, so the worker beats again as soon as it can."""
        w, c = self.w, self.w.config
        retry = Backoff(RETRY_FIRST, RETRY_MAX, immediate=True)
        pause, failing_since = c.heartbeat_interval, None
        while True:
            await wait_event(self.wake, pause)
            self.wake.clear()
            pause = c.heartbeat_interval
            if not w.registered:
                await self._reregister()
                continue
            try:
                faults.raise_once("heartbeat-raise")
                key_alive, reaped = await self._beat_once(r)
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                if failing_since is None:
                    failing_since = time.monotonic()
                    log.warning("worqr: heartbeat failed (%s); beating again at once", exc)
                pause = retry.next()
                continue
            if failing_since is not None:
                log.warning("worqr: heartbeat back after %.1f s", time.monotonic() - failing_since)
                failing_since = None
            retry.reset()
            if self.side is None or self.side.done():
                self.side = asyncio.ensure_future(self._side(r))
            if reaped:
                w.lost_registration(reaped)
            if (reaped or not key_alive) and not w.stopping:
                if not reaped:
                    log.warning(
                        "worqr: worker %s: its heartbeat key is gone (Redis lost it); registering again", w.name
                    )
                w.lost_registration([])
                await self._reregister()
            elif self.asked:
                self.asked = False
                w.changed.set()

    async def _beat_once(self, r):
        """One beat: the heartbeat key, then each queue's deadline (and housekeeping). Returns
        whether the key was still there, and the queues where we were reaped."""
        w, c = self.w, self.w.config
        key_alive = await r.set(keys.heartbeat_key(w.name), self._info(), px=int(self.ttl * 1000), xx=True)
        reaped = []
        for q in w.queues:
            spec = w.specs[q]
            status, dead, _ = await commands.heartbeat(
                q,
                w.name,
                ttl=c.heartbeat_ttl,
                interval=c.heartbeat_interval,
                lock_ttl=c.lock_ttl,
                retries=default(spec.retries, c.retries),
                backoff=default(spec.backoff, c.backoff),
                backoff_max=c.backoff_max,
                jitter=random.random() * c.backoff_jitter,
                history=c.failure_history,
            ).arun(r)
            if status == Code.NOT_REGISTERED:
                reaped.append(q)
            self.reaped_seen = self.reaped_seen or dead > 0
        if not reaped:
            self.last_beat = time.monotonic()
        return key_alive, reaped

    async def _side(self, r):
        """What a beat does besides beating, in a task of its own (one at a time), so that none of
        it holds the next beat up: note the workers reaped (and, every ``upkeep.GONE_CHECK_EVERY``,
        those that died alone on their queues: one worker of all takes each turn), sample the
        queues' depth, take a step of the queue sweep (``engine.sweep``: a thread's work when this worker holds its lease) and, through
        Sentinel with MIN_REPLICAS_ACK, ask the Sentinels where the master is. (After a SENTINEL
        FAILOVER the old master keeps serving, and taking this worker's heartbeats, until it is
        demoted, up to 10 s later, while producers, refused there for want of replicas, move to
        the new one: without asking, workers stay on the old master and run what is enqueued
        there. The Sentinels take a second each to give up when they are cut off.)"""
        try:
            if self.reaped_seen:
                self.reaped_seen = False
                try:
                    await self.note_reaped()
                except BaseException:
                    self.reaped_seen = True  # noted at the next beat's side work
                    raise
            elif time.monotonic() - self.gone_checked_at >= upkeep.GONE_CHECK_EVERY:
                self.gone_checked_at = time.monotonic()
                await asyncio.to_thread(upkeep.note_gone_workers_due, self.w.connection.client)
            if time.monotonic() - self.sampled_at >= DEPTH_EVERY:
                self.sampled_at = time.monotonic()
                await self.sample_depth()
            await asyncio.to_thread(self.sweep.step, self.w.connection.client)
            if self.pruner.due():
                await asyncio.to_thread(self.pruner.step, self.w.connection.client, list(self.w.queues))
            if self.w.config.min_replicas_ack > 0:
                await scripts.arecheck_master(self.w.redis)
                await scripts.arecheck_master(r)
        except NETWORK_ERRORS as exc:
            raise_if_cancelling()
            log.warning("worqr: heartbeat's side work failed: %s", exc)
        except Exception:
            log.exception("worqr: heartbeat's side work failed")

    async def leave(self, entry):
        """Take this worker off the registry and add ``entry`` to the list of gone workers, at
        Redis's time, in one send (``upkeep.leave_writes``), while its heartbeat key still lives:
        the check for dead workers never takes it for one, so it is recorded once, as stopped."""
        r = self.w.redis
        seconds, micros = await r.time()
        async with r.pipeline(transaction=False) as p:
            upkeep.leave_writes(p, entry, int(seconds) * 1000 + int(micros) // 1000)
            await p.execute()

    async def sample_depth(self):
        """Record each served queue's depth for the dashboard's history (the first sample of a
        minute wins, whichever worker takes it; ``upkeep.depth_writes``)."""
        r = self.w.redis
        seconds, micros = await r.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        for q in self.w.queues:
            counts = (await commands.counts(q).arun(r)).counts
            minute, hour, depth = upkeep.depth_sample(counts, now_ms)
            async with r.pipeline(transaction=False) as p:
                upkeep.depth_writes(p, q, minute, hour, depth)
                size = (await p.execute())[-1]
            if size > upkeep.DEPTH_MINUTES + upkeep.DEPTH_HOURS + 8:
                await asyncio.to_thread(upkeep.sweep_depth, self.w.connection.client, q, minute, hour)

    async def note_reaped(self):
        """Workers were reaped: those of the registry whose heartbeat key is gone are remembered
        as gone (once: ``upkeep.note_gone_workers``)."""
        await asyncio.to_thread(upkeep.note_gone_workers, self.w.connection.client)

    async def _reregister(self):
        try:
            await self.register_until_done()
        except WorkerNameTaken as exc:
            log.error("worqr: %s; stopping", exc)
            self.w.fatal(exc)


def _cpu_seconds():
    t = os.times()
    return t.user + t.system


def _pid_namespace():
    """This process's pid namespace (Linux), so that a pid is only judged in the namespace it
    belongs to (two containers may share a host name)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


_PID_NAMESPACE = _pid_namespace()


def _dead_here(holder):
    """Whether a heartbeat's holder ran on this host, in this pid namespace, under a process
    that has exited."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    if _PID_NAMESPACE is None or holder.get("pidns") != _PID_NAMESPACE:
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False
