"""Schedules made at run time, beside those of ``WORQR["SCHEDULES"]``: ``create``, ``update``,
``delete``.

A live schedule is kept in Redis exactly as a settings' one is (``schedules.py``: its hash in the
slot of its queue, its next run in the queue's ``schedules`` zset, its queue in
``worqr:schedules``), so every worker's scheduler fires it, once per tick (the ``fire`` script),
from the change's announcement on: no restart. What makes it live is its entry in
``keys.LIVE_SCHEDULES`` (name -> its settings as given, JSON): a worker's sync of its settings
leaves it alone (``schedules.sync``), and only a live schedule is changed or deleted here (a
settings' one is changed in settings). A name the settings declare too becomes the settings'
at the next sync.
"""

import json

from . import commands, keys, readmodel, ticks
from .enqueueing import check_room
from .errors import InvalidSchedule, ScheduleNotFound, TooManyQueues
from .schedule_settings import KEYS, parse, version_of
from .schedules import handler_lock, handler_partition, notify

#: The most schedules that can be made at run time (each is a hash of its own, payload included,
#: that every worker's scheduler reads): create refuses the next one.
MAX_LIVE = 1000


def live_names(client):
    """{name: queue} of the live schedules (those made at run time)."""
    return {name: raw.get("queue") for name, raw in readmodel.live_schedules(client).items()}


def _write(client, spec, raw, old_queue=None, max_queues=None):
    doc = spec.document(lock=handler_lock(spec), partition=handler_partition(spec))  # may raise: before any write
    if max_queues is not None and spec.queue != old_queue:
        try:
            check_room(client, spec.queue, max_queues)  # its runs would make the queue
        except TooManyQueues as exc:
            raise InvalidSchedule(spec.name, "queue", str(exc)) from None
    now = readmodel.server_ms(client)
    client.hset(keys.LIVE_SCHEDULES, spec.name, json.dumps(raw, sort_keys=True))
    client.sadd(keys.SCHEDULE_QUEUES, spec.queue)
    paused_since = None
    if old_queue and old_queue != spec.queue:  # moved: it keeps its pause state
        paused_since = client.hget(keys.schedule_key(old_queue, spec.name), "paused")
        commands.schedule_remove(old_queue, spec.name).run(client)
    commands.schedule_sync(
        spec.queue,
        spec.name,
        doc,
        version_of(doc),
        ticks.next_after(spec.timing, now),
        enabled=spec.enabled,
        paused_since=int(paused_since) if paused_since else None,
    ).run(client)
    client.hset(keys.SCHEDULES, spec.name, spec.queue)
    notify(client)


def _limits(config):
    """``parse``'s and ``_write``'s bounds from the engine's ``config`` (none without one)."""
    if config is None:
        return None, None
    return config.max_payload_bytes, config.max_queues


def create(client, name, *, config=None, **settings):
    """Make schedule ``name`` (the keys of a ``SCHEDULES`` entry: ``queue``, ``cron`` or
    ``every``, ``payload``, ``timezone``, ``missed``, ``overlap``, ``enabled``, ``retries``,
    ``timeout``, ``backoff``, ``lock``, ``callback``). It fires from its next tick on, on every
    worker. InvalidSchedule (naming the key at fault) if a setting is bad, the name is taken,
    ``MAX_LIVE`` schedules exist, or (with the engine's ``config``) its payload is over
    MAX_PAYLOAD_BYTES or its queue is new and MAX_QUEUES queues exist; nothing is written then."""
    max_payload_bytes, max_queues = _limits(config)
    spec = parse(name, settings, max_payload_bytes=max_payload_bytes)
    if client.hexists(keys.SCHEDULES, name):
        raise InvalidSchedule(name, None, "a schedule of that name exists already (update it, or pick another name)")
    if client.hlen(keys.LIVE_SCHEDULES) >= MAX_LIVE:
        raise InvalidSchedule(name, None, f"{MAX_LIVE:,} schedules made at run time exist already: delete one first")
    _write(client, spec, settings, max_queues=max_queues)
    return spec


def update(client, name, *, config=None, **fields):
    """Change a live schedule's settings (those given; ``cron`` replaces ``every`` and the other
    way round; a value of None removes an option). Its next run moves to the next tick of its new
    settings; its pause state, last run and counters stay. ScheduleNotFound if there is no live
    schedule ``name`` (a settings' one is changed in settings: InvalidSchedule)."""
    raw = _live(client, name)
    unknown = sorted(str(k) for k in fields if k not in KEYS)
    if unknown:
        raise InvalidSchedule(name, unknown[0], f"unknown key (the keys are: {', '.join(KEYS)})")
    if "cron" in fields and fields["cron"] is not None:
        raw.pop("every", None)
    if "every" in fields and fields["every"] is not None:
        raw.pop("cron", None)
    raw.update(fields)
    raw = {k: v for k, v in raw.items() if v is not None}
    max_payload_bytes, max_queues = _limits(config)
    spec = parse(name, raw, max_payload_bytes=max_payload_bytes)
    old_queue = client.hget(keys.SCHEDULES, name)
    _write(client, spec, raw, old_queue.decode() if old_queue else None, max_queues=max_queues)
    return spec


def delete(client, name):
    """Delete a live schedule: no run after this (a worker that was about to fire it finds it
    gone). ScheduleNotFound if there is none of that name; InvalidSchedule for a settings' one."""
    _live(client, name)
    queue = client.hget(keys.SCHEDULES, name)
    if queue is not None:
        commands.schedule_remove(queue.decode(), name).run(client)
    p = client.pipeline(transaction=False)
    p.hdel(keys.SCHEDULES, name)
    p.hdel(keys.LIVE_SCHEDULES, name)
    p.execute()
    notify(client)


def _live(client, name):
    """The settings a live schedule was given; raises when there is no live schedule ``name``."""
    raw = client.hget(keys.LIVE_SCHEDULES, name) if isinstance(name, str) else None
    if raw is None:
        if isinstance(name, str) and client.hexists(keys.SCHEDULES, name):
            raise InvalidSchedule(name, None, "is declared in settings (WORQR['SCHEDULES']): change it there")
        raise ScheduleNotFound(f"there is no schedule {name!r}")
    return json.loads(raw)
