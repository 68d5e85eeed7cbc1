"""Periodic tasks: schedules synced from settings to Redis, read, paused, resumed and triggered.

Where they live (``keys``): each schedule is a hash ``schedule:<name>`` in the slot of the queue
its runs go to, with its next run as its score in that queue's ``schedules`` zset, so the script
that fires a tick (``fire``: enqueue the run and move the schedule on) touches one slot. The
global hash ``worqr:schedules`` (name -> queue, read and written from Python only) says which
queue holds each schedule: a schedule found in another queue (left there by a concurrent sync)
is ignored, so a name never fires twice.

- ``sync(client, specs)``: what a worker does at start with its settings: new schedules start at
  their next tick, changed ones move to the next tick of their new settings, removed ones go;
  pause state, last run and counters are kept. Two workers syncing at once: the last writer
  wins, schedule by schedule.
- ``all``, ``get``, ``pause``, ``resume``, ``trigger`` take a synchronous client; every change
  is announced on ``keys.SCHEDULE_CHANGES`` so sleeping schedulers re-read.

The ticks are fired by every running worker (``worker.scheduler``).
"""

import json
from dataclasses import dataclass, field
from datetime import datetime

from . import commands, durations, keys, readmodel, ticks, tracing
from .codes import Code
from .enqueueing import lock_of, new_task_id, partition_of
from .errors import InvalidSchedule, ScheduleNotFound
from .registry import get_handler
from .schedule_settings import ScheduleSpec, from_document, version_of
from .task import ms_to_datetime

#: A tick due longer ago than this when a worker gets to it is missed (an outage, not a late
#: wake-up): ``missed`` decides whether it still runs. A tick is missed too once the tick after
#: it is due.
MISSED_GRACE_MS = 60_000
#: Tries of a resume whose settings changed under it.
_RESUME_TRIES = 5


@dataclass
class Schedule:
    """A schedule as Redis has it: its settings (as synced) and its state."""

    name: str
    queue: str
    cron: str | None
    every: float | None
    timezone: str
    payload: str
    enabled: bool
    missed: str
    overlap: bool
    options: dict
    next_run: datetime | None  # None while paused or disabled
    last_run: datetime | None  # when the last run was enqueued
    last_task_id: str | None
    paused: bool
    paused_at: datetime | None = None
    last_kind: str | None = None  # 'tick', 'catchup' or 'trigger'
    last_tick: datetime | None = None  # the tick the last run was for (None for a trigger)
    runs: int = 0  # runs enqueued for ticks (catch-ups included)
    catchups: int = 0
    triggered: int = 0
    skipped: int = 0  # ticks without a run because the last run was still live (overlap)
    missed_count: int = 0  # outages whose missed ticks were skipped ('skip')
    lateness: dict = field(default_factory=dict)  # {'buckets': [(bound, cumulative)], 'sum', 'count'}
    version: str = ""
    synced_at: datetime | None = None

    @property
    def spec(self):
        return ScheduleSpec(
            name=self.name,
            queue=self.queue,
            timing=self.timing,
            payload=self.payload,
            enabled=self.enabled,
            missed=self.missed,
            overlap=self.overlap,
            options=self.options,
        )

    @property
    def timing(self):
        return ticks.Timing(cron=self.cron, every=self.every, timezone=self.timezone)

    @classmethod
    def from_hash(cls, name, queue, h, score):
        """Build from the schedule's HGETALL reply and its zset score (None if not listed)."""
        if not h or b"spec" not in h or score is None:
            return None
        d = json.loads(h[b"spec"])
        g = h.get
        return cls(
            name=name,
            queue=queue,
            cron=d.get("cron"),
            every=d.get("every"),
            timezone=d.get("timezone") or "UTC",
            payload=d.get("payload", ""),
            enabled=d.get("enabled", True),
            missed=d.get("missed", "skip"),
            overlap=d.get("overlap", True),
            options=d.get("options") or {},
            next_run=None if score == float("inf") else ms_to_datetime(int(score)),
            last_run=ms_to_datetime(g(b"last")),
            last_task_id=_text(g(b"last_id")),
            paused=b"paused" in h,
            paused_at=ms_to_datetime(g(b"paused")),
            last_kind=_text(g(b"last_kind")),
            last_tick=ms_to_datetime(g(b"last_tick")),
            runs=_int(g(b"runs")),
            catchups=_int(g(b"catchups")),
            triggered=_int(g(b"triggered")),
            skipped=_int(g(b"skipped")),
            missed_count=_int(g(b"missed")),
            lateness=_lateness(h),
            version=_text(g(b"v")) or "",
            synced_at=ms_to_datetime(g(b"synced")),
        )

    def as_dict(self):
        """A JSON-friendly description (times in ISO 8601, UTC)."""
        out = {
            k: getattr(self, k)
            for k in (
                "name",
                "queue",
                "cron",
                "every",
                "timezone",
                "payload",
                "enabled",
                "missed",
                "overlap",
                "options",
                "last_task_id",
                "paused",
                "last_kind",
                "runs",
                "catchups",
                "triggered",
                "skipped",
            )
        }
        for k in ("next_run", "last_run", "last_tick", "paused_at"):
            value = getattr(self, k)
            out[k] = value.isoformat() if value else None
        return out


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) and value else None


def _int(value):
    return int(value) if value else 0


def _lateness(h):
    total, buckets = 0, []
    for bound in (*durations.BUCKETS, None):
        text = durations.bound_text(bound)
        total += int(h.get(f"le:{text}".encode(), 0))
        buckets.append((text, total))
    return {"buckets": buckets, "sum": float(h.get(b"late_sum", 0) or 0), "count": int(h.get(b"late_count", 0) or 0)}


def run_meta(name, tick_ms, kind):
    """The meta text of a run (``task.meta``): which schedule and tick it is for."""
    return json.dumps({"schedule": name, "tick": tick_ms, "kind": kind}, separators=(",", ":"))


def notify(client):
    """Tell sleeping schedulers that schedules changed (best effort: they also re-read after
    every reconnect)."""
    client.publish(keys.SCHEDULE_CHANGES, "changed")


# -- reading -----------------------------------------------------------------------------------


def _read(client, pairs):
    """The schedules of ``pairs`` ((name, queue)) that Redis has, in one round trip."""
    found = (Schedule.from_hash(*entry) for entry in readmodel.schedule_hashes(client, pairs))
    return [s for s in found if s is not None]


def all(client):  # noqa: A001  (the interface's name: schedules.all())
    """Every schedule, sorted by name, in two round trips."""
    return _read(client, sorted(readmodel.schedule_index(client).items()))


def get(client, name):
    """The schedule called ``name``, or None."""
    queue = readmodel.schedule_queue(client, name)
    found = _read(client, [(name, queue)]) if queue is not None else []
    return found[0] if found else None


def _find(client, name):
    found = get(client, name) if isinstance(name, str) else None
    if found is None:
        raise ScheduleNotFound(f"there is no schedule {name!r}")
    return found


# -- changing ----------------------------------------------------------------------------------


def pause(client, name):
    """Pause ``name`` (durable: kept across worker restarts and settings changes); returns
    whether it changed. ScheduleNotFound if unknown."""
    s = _find(client, name)
    code = commands.schedule_pause(s.queue, name, True).run(client)
    if code < 0:
        raise ScheduleNotFound(f"there is no schedule {name!r}")
    notify(client)
    return bool(code)


def resume(client, name):
    """Resume ``name`` from its next tick after now (no catch-up); returns whether it changed."""
    for _ in range(_RESUME_TRIES):
        s = _find(client, name)
        next_ms = ticks.next_after(s.timing, readmodel.server_ms(client))
        code = commands.schedule_pause(s.queue, name, False, version=s.version, next_ms=next_ms).run(client)
        if code == Code.STALE:
            continue  # its settings were synced meanwhile: compute the next tick again
        if code < 0:
            raise ScheduleNotFound(f"there is no schedule {name!r}")
        notify(client)
        return bool(code)
    raise InvalidSchedule(name, None, "its settings keep changing; try again")


def trigger(client, name):
    """Enqueue one run of ``name`` now (its next tick stays as it is); returns the task id."""
    s = _find(client, name)
    task_id = new_task_id(s.queue)
    meta = run_meta(name, None, "trigger")
    if tracing.enabled():  # the run continues the trace of whoever triggered it
        with tracing.enqueue_span(s.queue, 1, schedule=name) as (span, trace):
            code, is_new = commands.trigger(s.queue, name, task_id, meta, trace).run(client)
            tracing.enqueued(span, [task_id])
    else:
        code, is_new = commands.trigger(s.queue, name, task_id, meta).run(client)
    if code == Code.UNKNOWN:
        raise ScheduleNotFound(f"there is no schedule {name!r}")
    if is_new:
        client.sadd(keys.KNOWN_QUEUES, s.queue)
    return task_id


# -- syncing settings --------------------------------------------------------------------------


def handler_lock(spec):
    """The lock the queue's handler gives the schedule's payload, if the schedule sets none."""
    handler = get_handler(spec.queue)
    if spec.options.get("lock") is not None or handler is None or handler.lock is None:
        return None
    if isinstance(handler.lock, str):
        return handler.lock
    try:
        return lock_of(handler.lock, spec.payload, spec.queue)
    except Exception as exc:
        raise InvalidSchedule(spec.name, "lock", f"the handler's lock function failed on the payload: {exc}") from exc


def handler_partition(spec):
    """The partition key the queue's handler gives the schedule's payload, if it partitions."""
    handler = get_handler(spec.queue)
    if handler is None or handler.limits.partition is None:
        return None
    try:
        return partition_of(spec.queue, handler.limits.partition, spec.payload)
    except Exception as exc:
        raise InvalidSchedule(spec.name, "partition", f"the handler's partition function failed: {exc}") from exc


def check_handler(spec):
    """Raise InvalidSchedule (field 'lock' or 'partition') if the queue's handler's lock or
    partition function fails on the schedule's payload: each run would be refused. Touches no
    Redis (the system check and a worker's start call it before anything is written)."""
    handler_lock(spec)
    handler_partition(spec)


def sync(client, specs):
    """Make Redis hold exactly these schedules (see the module doc). Returns
    {'created': [...], 'changed': [...], 'removed': [...]} (names)."""
    specs = list(specs)
    # may raise: before any write
    documents = {s.name: s.document(lock=handler_lock(s), partition=handler_partition(s)) for s in specs}
    now = readmodel.server_ms(client)
    index = {k.decode(): v.decode() for k, v in client.hgetall(keys.SCHEDULES).items()}
    done = {"created": [], "changed": [], "removed": []}
    for spec in specs:
        doc = documents[spec.name]
        old = index.get(spec.name)
        paused_since = None
        if old and old != spec.queue:  # moved: it keeps its pause state
            paused_since = client.hget(keys.schedule_key(old, spec.name), "paused")
        client.sadd(keys.SCHEDULE_QUEUES, spec.queue)
        result = commands.schedule_sync(
            spec.queue,
            spec.name,
            doc,
            version_of(doc),
            ticks.next_after(spec.timing, now),
            enabled=spec.enabled,
            paused_since=int(paused_since) if paused_since else None,
        ).run(client)
        client.hset(keys.SCHEDULES, spec.name, spec.queue)
        if result:
            done["created" if result == 1 else "changed"].append(spec.name)
    declared = {s.name for s in specs}
    live = {k.decode(): v for k, v in client.hgetall(keys.LIVE_SCHEDULES).items() if k.decode() not in declared}
    if len(live) < client.hlen(keys.LIVE_SCHEDULES):  # declared in settings now: the settings' from now on
        client.hdel(keys.LIVE_SCHEDULES, *declared)
    wanted = {s.name: s.queue for s in specs}
    wanted.update({name: json.loads(raw)["queue"] for name, raw in live.items()})  # made at run time: kept
    for queue in sorted(q.decode() for q in client.smembers(keys.SCHEDULE_QUEUES)):
        for raw in client.zrange(keys.queue_key(queue, "schedules"), 0, -1):
            name = raw.decode()
            if wanted.get(name) == queue or (name not in declared and _live_queue(client, name) == queue):
                continue  # (the second: made or moved at run time since ``live`` was read)
            if commands.schedule_remove(queue, name).run(client):
                if name not in wanted:
                    done["removed"].append(name)
    gone = [name for name in index if name not in wanted]  # (live ones are wanted)
    if gone:
        client.hdel(keys.SCHEDULES, *gone)
    notify(client)
    return done


def _live_queue(client, name):
    """The queue of live schedule ``name`` as Redis has it now (None: not a live one). A create or
    move writes its ``LIVE_SCHEDULES`` entry before its schedule, so a schedule found in a queue
    that this says it belongs to was made there at run time, whatever ``sync`` read before."""
    raw = client.hget(keys.LIVE_SCHEDULES, name)
    return json.loads(raw).get("queue") if raw else None


def spec_of(schedule_hash):
    """The ScheduleSpec and version of a schedule hash's synced settings (for the scheduler)."""
    return from_document(schedule_hash[b"spec"].decode()), schedule_hash[b"v"].decode()
