"""Heart: a worker's registration and heartbeat.

1. Register: the heartbeat key (TTL), which also claims the worker's name (a name held by a
   live worker is refused), the worker registry, and each queue's worker set.
2. Beat every HEARTBEAT_INTERVAL: refresh the key and, per queue, the deadline (which also reaps
   dead workers, recovers stuck tasks and keeps locks alive). A failed beat is sent again at once
   and then every RETRY_MAX at most, until one gets through; ``start`` refusing the worker as
   late (its deadline passed) asks for a beat at once (``beat_soon``).
3. A lost registration (reaped while unresponsive, or a heartbeat key that Redis lost) stops the
   tasks that were taken back and registers anew.
4. After every beat that got through, the worker's periodic duties get their turn
   (``duties.Duties``: noting gone workers, depth samples, the queue and outbox sweeps).

The heart is given what it needs, not the worker: the ``Capsule`` (name, queues, handlers,
settings), the ``Status`` (stopping, registered), the clients, the duties, ``counts()`` (tasks
processed, failed and active, for the heartbeat's record) and the worker's callbacks:
``on_registered()``, ``on_lost(queues)`` (presumed dead there, or ``[]``: the key was lost) and
``fatal(exc)``.

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

from .. import commands, faults, keys, upkeep
from ..backoff import Backoff, wait_event
from ..codes import Code
from ..connection import NETWORK_ERRORS, raise_if_cancelling
from ..errors import WorkerNameTaken
from .child import rss_mb
from .reporter import default

log = logging.getLogger("worqr.worker")

#: A failed beat is sent again at once, then after RETRY_FIRST seconds doubling to RETRY_MAX:
#: after an outage, every worker beats within RETRY_MAX of Redis answering again (well within
#: the HEARTBEAT_TTL a worker has then: heartbeat.lua).
RETRY_FIRST, RETRY_MAX = 0.05, 0.5
#: While Redis stays out of reach, the worker says it still waits this often (seconds).
STILL_WAITING_EVERY = 30.0


class Outage:
    """What a retry loop says of an outage: its first failure once, that it still waits every
    STILL_WAITING_EVERY, and how long it took once a call went through (not one line per try)."""

    def __init__(self):
        self.since = self.told = None

    def failed(self, exc, first):
        """A call failed with ``exc``; ``first`` is the line said when an outage begins."""
        now = time.monotonic()
        if self.since is None:
            self.since = self.told = now
            log.warning("worqr: %s", first)
        elif now - self.told >= STILL_WAITING_EVERY:
            self.told = now
            log.warning("worqr: still waiting for Redis (%.0f s so far: %s)", now - self.since, exc)

    def over(self, what):
        """A call went through: says ``Redis is back: <what> after N s`` if it ends an outage."""
        if self.since is not None:
            log.warning("worqr: Redis is back: %s after %.1f s", what, time.monotonic() - self.since)
            self.since = None


class Heart:
    def __init__(self, capsule, connection, redis, status, *, duties, gone, counts, on_registered, on_lost, fatal):
        """``gone``: the duty that notes gone workers (told of the workers each beat reaped)."""
        self.capsule, self.config = capsule, capsule.config
        self.connection, self.redis, self.status = connection, redis, status
        self.duties, self.gone, self.counts = duties, gone, counts
        self.on_registered, self.on_lost, self.fatal = on_registered, on_lost, fatal
        self.instance = os.urandom(8).hex()  # tells this process from another of the same name
        self.last_beat = time.monotonic()
        self.registered_once = False
        self._cpu_mark = (time.monotonic(), _cpu_seconds())
        self.wake = asyncio.Event()  # beat now (``beat_soon``)
        self.asked = False  # a beat was asked for: tell the worker when one got through
        self.told_quiet = False  # whether a beat has told the dashboards that we went quiet

    @property
    def ttl(self):
        return self.config.heartbeat_ttl

    def unresponsive(self):
        """Whether the last successful beat is older than the TTL (we may have been reaped)."""
        return time.monotonic() - self.last_beat > self.ttl

    def _info(self):
        cap, counts = self.capsule, self.counts()
        return json.dumps(
            {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "pidns": _PID_NAMESPACE,
                "queues": cap.queues,
                "concurrency": cap.concurrency,
                "started_at": cap.started_at,
                "instance": self.instance,
                "processed": counts["processed"],
                "failed": counts["failed"],
                "active": counts["active"],
                "ttl_ms": int(self.ttl * 1000),
                "rss_mb": round(rss_mb(), 1),
                "cpu": self._cpu_percent(),
                "quiet": self.status.quiet,
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
        cap, counts = self.capsule, self.counts()
        return {
            "name": cap.name,
            "how": how,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": cap.queues,
            "concurrency": cap.concurrency,
            "started_at": cap.started_at,
            "processed": counts["processed"],
            "failed": counts["failed"],
        }

    # -- registration ----------------------------------------------------------------------

    async def register_until_done(self, backoff=None):
        """Register, retrying through an outage, which is said once (then every
        STILL_WAITING_EVERY), as the heartbeat says it: not one line per try. ``backoff``: the
        pauses between tries (by default 50 ms doubling to 2 s)."""
        backoff, outage = backoff or Backoff(), Outage()
        while not self.status.stopping:
            try:
                await self._register()
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                outage.failed(exc, f"cannot register ({exc}); waiting for Redis")
                await backoff.wait(self.status.stopped)
                continue
            outage.over("registered")
            return

    async def _claim_name(self):
        """Set the heartbeat key if the name is free or ours. A name whose holder died is free
        once its key expires (within the TTL): wait that long, no longer; a holder that ran on this
        host under a pid that no longer exists is known dead at once (a restart)."""
        r, key, ttl_ms = self.redis, keys.heartbeat_key(self.capsule.name), int(self.ttl * 1000)
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
                    f"a live worker named {self.capsule.name!r} is already running: give this one another --name"
                )
            await asyncio.sleep(0.1)

    async def _take_over(self, key, seen, ttl_ms):
        """Replace the heartbeat key if it still holds ``seen`` (another process may be taking
        the same name over at the same moment: only one wins)."""
        async with self.redis.pipeline(transaction=True) as p:
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
        cap, c, r = self.capsule, self.config, self.redis
        await self._claim_name()
        await r.sadd(keys.WORKER_REGISTRY, cap.name)
        for q in cap.queues:
            back = await commands.register(
                q,
                cap.name,
                ttl=c.heartbeat_ttl,
                lock_ttl=c.lock_ttl,
                grace=cap.timeout_grace(q),
                default_timeout=cap.specs[q].timeout,
                fresh=not self.registered_once,
                limits=cap.specs[q].limits,
                interval=c.heartbeat_interval,
            ).arun(r)
            if back:
                log.warning("worqr: %d task(s) of an earlier worker named %s went back to %s", back, cap.name, q)
            await r.sadd(keys.KNOWN_QUEUES, q)
            faults.kill("register-kill")  # registered on its first queue only
        self.registered_once = True
        self.last_beat = time.monotonic()
        self.on_registered()

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
        c = self.config
        timeout = max(1.0, c.heartbeat_ttl - c.heartbeat_interval)
        client = self.connection.async_client(max_connections=2, timeout=timeout)
        try:
            await self._beat(client)
        finally:
            await client.aclose()

    async def _beat(self, r):
        """Beat every HEARTBEAT_INTERVAL; a beat that fails is sent again at once (on a new
        connection: the pool drops the one that failed), then after pauses of 50 ms doubling
        to RETRY_MAX while Redis stays out of reach, so the worker beats again as soon as it can."""
        c, status = self.config, self.status
        retry = Backoff(RETRY_FIRST, RETRY_MAX, immediate=True)
        # The first beat at once: a heartbeat started again after it failed (1 s later) would
        # otherwise beat an interval after that, as its key, refreshed before the failure, expires.
        pause, outage = 0.0, Outage()
        while True:
            await wait_event(self.wake, pause)
            self.wake.clear()
            pause = c.heartbeat_interval
            if not status.registered:
                await self._reregister()
                continue
            try:
                faults.raise_once("heartbeat-raise")
                key_alive, reaped = await self._beat_once(r)
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                outage.failed(
                    exc,
                    f"heartbeat failed ({exc}); waiting for Redis: running tasks go on, new ones are taken once it answers",
                )
                pause = retry.next()
                continue
            outage.over("heartbeat back")
            retry.reset()
            self.duties.start(r)
            if reaped:
                self.on_lost(reaped)
            if (reaped or not key_alive) and not status.stopping:
                if not reaped:
                    log.warning(
                        "worqr: worker %s: its heartbeat key is gone (Redis lost it); registering again",
                        self.capsule.name,
                    )
                self.on_lost([])
                await self._reregister()
            elif self.asked:
                self.asked = False
                status.poke()

    async def _beat_once(self, r):
        """One beat: the heartbeat key, then each queue's deadline (and housekeeping). Returns
        whether the key was still there, and the queues where we were reaped."""
        cap, c = self.capsule, self.config
        quiet = self.status.quiet  # as the record written now says
        key_alive = await r.set(keys.heartbeat_key(cap.name), self._info(), px=int(self.ttl * 1000), xx=True)
        if key_alive and quiet and not self.told_quiet:
            await self._tell_quiet(r)
        reaped = []
        for q in cap.queues:
            spec = cap.specs[q]
            status, dead, _ = await commands.heartbeat(
                q,
                cap.name,
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
            self.gone.saw_reaped(dead)
        if not reaped:
            self.last_beat = time.monotonic()
        return key_alive, reaped

    async def _tell_quiet(self, r):
        """The record now says quiet: an event on each of the worker's queues (``worker_quiet``),
        so the dashboard pages that show the worker refresh (they refresh on their queues'
        events, and going quiet is none of a queue's transitions)."""
        cap = self.capsule
        for q in cap.queues:  # (one by one: a Cluster client sends a keyless command to any node)
            await r.publish(keys.queue_events_channel(q), json.dumps({"e": "worker_quiet", "w": cap.name, "q": q}))
        self.told_quiet = True

    async def leave(self, entry):
        """Take this worker off the registry and add ``entry`` to the list of gone workers, at
        Redis's time, in one send (``upkeep.leave_writes``), while its heartbeat key still lives:
        the check for dead workers never takes it for one, so it is recorded once, as stopped."""
        r = self.redis
        seconds, micros = await r.time()
        async with r.pipeline(transaction=False) as p:
            upkeep.leave_writes(p, entry, int(seconds) * 1000 + int(micros) // 1000)
            await p.execute()

    async def _reregister(self):
        """Register again from the beat loop, which does not beat meanwhile: tries are paced as
        beats are (RETRY_MAX at most), for the queues' deadlines run out a TTL after the last beat
        and other workers then reap this one (2 s pauses under connection resets did that)."""
        try:
            await self.register_until_done(Backoff(RETRY_FIRST, RETRY_MAX, immediate=True))
        except WorkerNameTaken as exc:
            log.error("worqr: %s; stopping", exc)
            self.fatal(exc)


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
