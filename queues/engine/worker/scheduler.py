"""Scheduler: a worker's part in firing the periodic tasks (schedules). There is no beat process:
every running worker takes part, whatever queues it serves.

1. At start, a worker given its settings' schedules syncs them to Redis (``schedules.sync``).
2. It reads every schedule's next run and settings, and sleeps until the earliest is due, or
   until a change is announced on ``keys.SCHEDULE_CHANGES`` (a sync, pause or resume by anyone);
   after every (re)subscribe it reads them again, so a change missed while disconnected is seen.
   No polling: an idle scheduler costs Redis nothing between ticks.
3. When a tick is due it computes the tick after it and calls ``fire``: the first worker's call
   enqueues the run and moves the schedule on, atomically; the other workers' calls find it
   moved (STALE) and sleep again. So each tick gives exactly one task, whatever the number of
   workers, their crashes and restarts. A tick found late (due more than
   ``schedules.MISSED_GRACE_MS`` ago, or the next one due too: an outage) is fired again in
   'missed' mode with the first tick after now: one catch-up run (``missed: "once"``) or none.
   After Redis was out of reach, only the ticks due before our last failed call are missed: the
   schedule moves on to the last tick due since then, which runs as a tick of its own (it fell
   with Redis up, or within RECONNECT_MAX of it); calls are retried every RECONNECT_MAX at most,
   so a tick due after Redis came back runs, however short the schedule's interval.
"""

import asyncio
import logging
import time
from dataclasses import dataclass

from .. import commands, faults, keys, schedules, ticks
from ..backoff import Backoff, wait_event
from ..codes import Code
from ..connection import NETWORK_ERRORS, is_cluster, raise_if_cancelling
from ..enqueueing import new_task_id
from ..errors import ConfigurationError
from ..schedule_settings import ScheduleSpec, from_document
from .control import Listener

log = logging.getLogger("worqr.worker")

#: While Redis is out of reach the scheduler tries again after 50 ms doubling to this, so that it
#: is back within a fraction of a tick's interval of Redis (a 2 s pause skipped, as missed, the
#: tick of a 1 s schedule that fell with Redis already up).
RECONNECT_MAX = 0.25
#: Ticks looked at, at most, for the last one due since Redis was out of reach.
_MAX_TICKS = 1000


@dataclass
class Entry:
    """What the scheduler knows of one schedule: its settings (and their version) and next run."""

    queue: str
    name: str
    spec: ScheduleSpec
    version: str
    next_ms: int | None  # None: no next run (paused, disabled)


class Scheduler:
    def __init__(self, redis, connection, status, *, keep_running, fatal, specs=None):
        """Fires on ``redis`` (syncs with ``connection``'s client) until ``status`` says stop;
        ``keep_running(what, run)`` keeps its listener running, ``fatal(exc)`` stops the worker.
        ``specs``: the schedules of this worker's settings, synced at start (None: no sync;
        the worker still fires the schedules Redis has)."""
        self.redis, self.connection, self.status = redis, connection, status
        self.keep_running, self.fatal = keep_running, fatal
        self.specs = specs
        self.entries = {}
        self.dirty = True
        self.changed = asyncio.Event()
        self.offset_ms = 0.0  # Redis's clock minus ours
        self.fired = 0
        #: Redis's time (as we reckon it) of our last call that failed, until a round of firing
        #: went through: ticks due up to then were missed, those after it were not
        self.unreachable_ms = None

    def _now_ms(self):
        return time.time() * 1000 + self.offset_ms

    def _clock(self, redis_now_ms):
        self.offset_ms = redis_now_ms - time.time() * 1000

    def _on_change(self, _data=None):
        self.dirty = True
        self.changed.set()

    # -- the loop ----------------------------------------------------------------------------

    async def run(self):
        if self.specs is not None and not await self._sync_until_done():
            return
        self.dirty = True  # (started again after a failure: what it had read may be half done)
        listener = Listener(self.redis, keys.SCHEDULE_CHANGES, self._on_change, self._on_change)
        listening = asyncio.ensure_future(self.keep_running("schedule listener", listener.run))
        try:
            await self._loop()
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)

    async def _sync_until_done(self):
        backoff = Backoff()
        while not self.status.stopping:
            try:
                done = await asyncio.to_thread(schedules.sync, self.connection.client, self.specs)
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                log.warning("worqr: cannot sync the schedules (%s); retrying", exc)
                await backoff.wait(self.status.stopped)
                continue
            except ConfigurationError as exc:
                log.error("worqr: %s; stopping", exc)
                self.fatal(exc)
                return False
            for what in ("created", "changed", "removed"):
                if done[what]:
                    log.info("worqr: schedules %s: %s", what, ", ".join(done[what]))
            return True
        return False

    async def _loop(self):
        backoff = Backoff(cap=RECONNECT_MAX)
        while not self.status.stopping:
            self.changed.clear()
            try:
                faults.raise_once("scheduler-raise")
                if self.dirty:
                    self.dirty = False
                    await self._load()
                await self._fire_due()
                backoff.reset()
                self.unreachable_ms = None
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                self.dirty = True
                if self.unreachable_ms is None:
                    log.warning("worqr: scheduler lost Redis (%s); retrying", exc)
                self.unreachable_ms = self._now_ms()
                await backoff.wait(self.status.stopped)
                continue
            await wait_event(self.changed, self._sleep_for())

    def _sleep_for(self):
        due = [e.next_ms for e in self.entries.values() if e.next_ms is not None]
        if not due:
            return None  # nothing to fire until a change is announced
        return max(0.0, (min(due) - self._now_ms() + 1) / 1000)

    # -- reading -----------------------------------------------------------------------------

    async def _load(self):
        """Read every schedule's settings version and next run (one pipelined round trip, and
        the settings of those whose version changed)."""
        r = self.redis
        index = {k.decode(): v.decode() for k, v in (await r.hgetall(keys.SCHEDULES)).items()}
        pairs = sorted(index.items())
        p = r.pipeline(transaction=False)
        on_cluster = is_cluster(r)  # a cluster pipeline refuses keyless commands: TIME goes alone
        if not on_cluster:
            p.time()
        for name, queue in pairs:
            p.hmget(keys.schedule_key(queue, name), "v", "spec")
            p.zscore(keys.queue_key(queue, "schedules"), name)
        replies = await p.execute() if pairs or not on_cluster else []
        if on_cluster:
            replies.insert(0, await r.time())
        seconds, micros = replies[0]
        self._clock(int(seconds) * 1000 + int(micros) // 1000)
        entries = {}
        for i, (name, queue) in enumerate(pairs):
            (version, doc), score = replies[1 + 2 * i], replies[2 + 2 * i]
            if version is None or doc is None or score is None:
                continue  # not (or no longer) in its queue: a sync is under way
            version = version.decode()
            old = self.entries.get(name)
            spec = old.spec if old and old.version == version and old.queue == queue else from_document(doc.decode())
            entries[name] = Entry(queue, name, spec, version, None if score == float("inf") else int(score))
        self.entries = entries

    # -- firing ------------------------------------------------------------------------------

    async def _fire_due(self):
        """Fire every due schedule at once (ticks that fall together do not wait for each
        other's round trips)."""
        now = self._now_ms()
        due = [e for e in self.entries.values() if e.next_ms is not None and e.next_ms <= now]
        if due and not self.status.stopping:
            for result in await asyncio.gather(*(self._fire(e) for e in due), return_exceptions=True):
                if isinstance(result, BaseException):
                    raise result

    async def _fire(self, e):
        due = e.next_ms
        timing = e.spec.timing
        reply = await self._call(e, due, ticks.next_after(timing, due), "tick")
        missed = reply.code == Code.MISSED
        if missed:
            reply = await self._call(e, due, self._moved_on(timing, due, reply.now_ms), "missed")
        if reply.code == Code.UNKNOWN or (reply.code == Code.STALE and reply.version != e.version):
            self.dirty = True  # removed or changed by a sync: read again
            self.changed.set()
        e.next_ms = reply.next_ms if reply.next_ms >= 0 else None
        if reply.code == Code.OK:
            self.fired += 1
            if reply.is_new_queue:
                await self.redis.sadd(keys.KNOWN_QUEUES, e.queue)
            log.debug("worqr: schedule %s: task %s for tick %d (%d ms late)", e.name, reply.task_id, due, reply.late_ms)
        elif reply.code == Code.SKIPPED:
            why = "missed during an outage" if missed and e.spec.missed == "skip" else "its last run is still live"
            log.info("worqr: schedule %s: no run for tick %d (%s)", e.name, due, why)

    def _moved_on(self, timing, due, now_ms):
        """Where a schedule whose tick ``due`` was missed moves on to: the first tick after now,
        or, when Redis was out of reach since ``due``, the last tick due after our last failed
        call (it falls due again at once, and runs as a tick of its own)."""
        after = ticks.next_after(timing, now_ms)
        if self.unreachable_ms is None or due > self.unreachable_ms:
            return after
        tick = ticks.next_after(timing, self.unreachable_ms)
        for _ in range(_MAX_TICKS):
            if tick > now_ms:
                return tick  # none was due since
            following = ticks.next_after(timing, tick)
            if following > now_ms:
                return tick
            tick = following
        return after

    async def _call(self, e, due, after, mode):
        kind = "catchup" if mode == "missed" else "tick"
        reply = await commands.fire(
            e.queue,
            e.name,
            e.version,
            due,
            after,
            mode=mode,
            grace_ms=schedules.MISSED_GRACE_MS,
            task_id=new_task_id(e.queue),
            meta=schedules.run_meta(e.name, due, kind),
        ).arun(self.redis)
        self._clock(reply.now_ms)
        return reply
