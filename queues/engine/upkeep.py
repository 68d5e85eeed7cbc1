"""Upkeep: the writes that keep what the read model (``engine.readmodel``, which only reads)
shows true and bounded, made by the workers' periodic duties (``worker.heartbeat``), never by a
read. Plain functions on a synchronous client (a worker runs them on a thread), best effort: a
call that fails is made again at a later beat.

- Gone workers (``keys.GONE_WORKERS``, the last ``keys.GONE_WORKERS_MAX``): ``remember_gone``
  records one; a worker that stops records itself as it leaves the registry (``leave_writes``);
  ``note_gone_workers`` takes the registered workers whose heartbeat key expired (they died
  without stopping) off the registry and records each as reaped, once: only the caller whose
  SREM removes the name records it. A worker calls it after its beat reaped workers, and every
  ``GONE_CHECK_EVERY`` seconds through ``note_gone_workers_due``, which one worker of all takes
  each turn (``keys.GONE_CHECK``): a worker that died alone on its queues (no beat of another
  reaps it) is recorded too, with no dashboard open.
- Each queue's depth history (``depth``): ``sample_depth`` records the depth now (the first
  sample of a minute wins), ``depth_sample`` and ``depth_writes`` are its parts (the worker's
  asyncio beat sends them itself), ``sweep_depth`` drops samples left past their age.
"""

import json

from . import keys
from .readmodel import queue_counts, server_ms, without_heartbeat

#: Seconds between two checks of the worker registry for workers that died (across all the
#: workers: one of them takes each turn). A dead worker is recorded within about this long
#: after its heartbeat key expired.
GONE_CHECK_EVERY = 5.0
#: Depth samples kept: one a minute for 24 h, one an hour for 7 days.
DEPTH_MINUTES, DEPTH_HOURS = 1440, 168


def gone_writes(pipe, entry, now_ms):
    """Queue on ``pipe`` (sync or asyncio) the commands that record ``entry`` (name, how:
    'stopped' or 'reaped', ...) as gone at ``now_ms``, keeping the last ``GONE_WORKERS_MAX``."""
    pipe.lpush(keys.GONE_WORKERS, json.dumps(dict(entry, at=now_ms)))
    pipe.ltrim(keys.GONE_WORKERS, 0, keys.GONE_WORKERS_MAX - 1)


def leave_writes(pipe, entry, now_ms):
    """Queue on ``pipe`` the commands by which a worker that stops leaves (``entry``: its gone
    record): off the registry and on the gone list, sent together before its heartbeat key goes.
    Killed before the send, it is recorded as reaped once its key expires; after, as stopped; the
    check for dead workers, which wants a registered name without a key, never records it too."""
    pipe.srem(keys.WORKER_REGISTRY, entry["name"])
    gone_writes(pipe, entry, now_ms)


def remember_gone(client, entry):
    """Add a gone worker (``entry``: name, how: 'stopped' or 'reaped', ...) to the list of the
    last ``keys.GONE_WORKERS_MAX``, stamped with Redis's time."""
    now_ms = server_ms(client)
    p = client.pipeline(transaction=False)
    gone_writes(p, entry, now_ms)
    p.execute()


def note_gone_workers(client):
    """Record as reaped, once each, the registered workers whose heartbeat key is gone (they
    died without stopping): each is taken off the registry, and recorded only by the caller
    whose SREM removed it. Returns the names this call recorded."""
    noted = []
    for name in without_heartbeat(client):
        if client.srem(keys.WORKER_REGISTRY, name):
            remember_gone(client, {"name": name, "how": "reaped"})
            noted.append(name)
    return noted


def note_gone_workers_due(client, every=GONE_CHECK_EVERY):
    """``note_gone_workers`` if no worker took the turn in the last ``every`` seconds (this call
    takes it); else nothing. Returns the names recorded."""
    if not client.set(keys.GONE_CHECK, "1", nx=True, px=max(1, int(every * 1000))):
        return []
    return note_gone_workers(client)


def depth_sample(counts, now_ms):
    """The fields a depth sample writes (``sample_depth``): its minute and hour, and the depth
    (tasks waiting to run: pending, waiting for a lock, and delayed)."""
    return now_ms // 60000, now_ms // 3600000, counts["pending"] + counts["delayed"]


def depth_writes(pipe, queue, minute, hour, depth):
    """Queue on ``pipe`` (sync or asyncio) the commands that record one sample: the first
    sample of a minute (and of an hour) wins; the samples 24 h (7 days) old go."""
    key = keys.queue_key(queue, "depth")
    pipe.hsetnx(key, f"m{minute}", depth)
    pipe.hsetnx(key, f"h{hour}", depth)
    pipe.hdel(key, f"m{minute - DEPTH_MINUTES}", f"h{hour - DEPTH_HOURS}")
    pipe.hlen(key)


def sweep_depth(client, queue, minute, hour):
    """Drop samples left past their age by a gap (no worker for a while): bounded by the cap."""
    key = keys.queue_key(queue, "depth")
    old = []
    for f in client.hkeys(key):
        f = f.decode("utf-8", "replace") if isinstance(f, bytes) else f
        kind, at = f[:1], int(f[1:]) if f[1:].isdigit() else 0
        if (
            (kind == "m" and at <= minute - DEPTH_MINUTES)
            or (kind == "h" and at <= hour - DEPTH_HOURS)
            or kind not in "mh"
        ):
            old.append(f)
    if old:
        client.hdel(key, *old)


def sample_depth(client, queue):
    """Record the depth of ``queue`` now (once a minute at most; a worker's heartbeat sends the
    same commands on its asyncio client)."""
    minute, hour, depth = depth_sample(queue_counts(client, queue), server_ms(client))
    p = client.pipeline(transaction=False)
    depth_writes(p, queue, minute, hour, depth)
    if p.execute()[-1] > DEPTH_MINUTES + DEPTH_HOURS + 8:
        sweep_depth(client, queue, minute, hour)
