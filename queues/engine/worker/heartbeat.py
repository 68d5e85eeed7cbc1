"""Heart: a worker's registration and heartbeat.

1. Register: the heartbeat key (TTL), which also claims the worker's name (a name held by a
   live worker is refused), the worker registry, and each queue's worker set.
2. Beat every HEARTBEAT_INTERVAL: refresh the key and, per queue, the deadline (which also reaps
   dead workers, recovers stuck tasks and keeps locks alive).
3. A lost registration (reaped while unresponsive, or Redis restarted) stops the tasks that were
   taken back and registers anew.
"""

import asyncio
import json
import logging
import os
import random
import socket
import time

import redis

from .. import commands, keys
from ..backoff import Backoff
from ..codes import Code
from ..connection import NETWORK_ERRORS, raise_if_cancelling
from ..errors import WorkerNameTaken
from .reporter import default

log = logging.getLogger("worqr.worker")


class Heart:
    def __init__(self, worker):
        self.w = worker
        self.instance = os.urandom(8).hex()  # tells this process from another of the same name
        self.last_beat = time.monotonic()
        self.registered_once = False

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
            }
        )

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
            ).arun(w.redis)
            if back:
                log.warning("worqr: %d task(s) of an earlier worker named %s went back to %s", back, w.name, q)
            await w.redis.sadd(keys.KNOWN_QUEUES, q)
        self.registered_once = True
        self.last_beat = time.monotonic()
        w.registration_done()

    # -- beating ---------------------------------------------------------------------------

    async def run(self):
        w, c = self.w, self.w.config
        while True:
            await asyncio.sleep(c.heartbeat_interval)
            if not w.registered:
                await self._reregister()
                continue
            try:
                key_alive = await w.redis.set(
                    keys.heartbeat_key(w.name), self._info(), px=int(self.ttl * 1000), xx=True
                )
                reaped = []
                for q in w.queues:
                    spec = w.specs[q]
                    status, _, _ = await commands.heartbeat(
                        q,
                        w.name,
                        ttl=c.heartbeat_ttl,
                        lock_ttl=c.lock_ttl,
                        retries=default(spec.retries, c.retries),
                        backoff=default(spec.backoff, c.backoff),
                        backoff_max=c.backoff_max,
                        jitter=random.random() * c.backoff_jitter,
                        history=c.failure_history,
                    ).arun(w.redis)
                    if status == Code.NOT_REGISTERED:
                        reaped.append(q)
                if not reaped:
                    self.last_beat = time.monotonic()
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                log.warning("worqr: heartbeat failed: %s", exc)
                continue
            if reaped:
                w.lost_registration(reaped)
            if (reaped or not key_alive) and not w.stopping:
                log.warning("worqr: worker %s found its registration gone; registering again", w.name)
                w.lost_registration([])
                await self._reregister()

    async def _reregister(self):
        try:
            await self.register_until_done()
        except WorkerNameTaken as exc:
            log.error("worqr: %s; stopping", exc)
            self.w.fatal(exc)


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
