"""Reads of workers: the live ones (their heartbeats), one worker and the tasks it holds, the
workers gone lately, and the registered names whose heartbeat is gone. Reading a worker that
died changes nothing: the workers' upkeep (``engine.upkeep``) takes it off the registry and
records it as gone."""

import json

from .. import keys
from ..task import ms_to_datetime
from ._common import decode, read_tasks


def workers(client):
    """Live workers: name, host, pid, queues, concurrency, processed, failed, active,
    started, and heartbeat age in seconds. Registered names whose heartbeat key is gone are left
    out (``without_heartbeat``)."""
    names = sorted(decode(n) for n in client.smembers(keys.WORKER_REGISTRY))
    if not names:
        return []
    p = client.pipeline(transaction=False)
    for name in names:
        p.get(keys.heartbeat_key(name))
        p.pttl(keys.heartbeat_key(name))
    replies = p.execute()
    out = []
    for i, name in enumerate(names):
        raw, pttl = replies[2 * i], replies[2 * i + 1]
        if raw is None:
            continue
        info = json.loads(raw)
        ttl_ms = int(info.get("ttl_ms", 3000))
        info["name"] = name
        info["heartbeat_age"] = max(0.0, (ttl_ms - max(pttl, 0)) / 1000)
        out.append(info)
    return out


def without_heartbeat(client):
    """Names in the worker registry whose heartbeat key is gone, in two round trips: workers
    that died without stopping (their key expired), or that are stopping right now."""
    names = sorted(decode(n) for n in client.smembers(keys.WORKER_REGISTRY))
    p = client.pipeline(transaction=False)
    for name in names:
        p.exists(keys.heartbeat_key(name))
    return [name for name, alive in zip(names, p.execute() if names else []) if not alive]


def worker(client, name):
    """One live worker's heartbeat info (as ``workers`` gives it), or None."""
    raw = client.get(keys.heartbeat_key(name))
    if raw is None:
        return None
    info = json.loads(raw)
    info["name"] = name
    return info


def workers_active(client, pairs):
    """How many tasks each (worker, queue) pair holds right now, in one round trip."""
    p = client.pipeline(transaction=False)
    for worker, queue in pairs:
        p.scard(keys.worker_tasks_key(queue, worker))
    return p.execute()


def worker_tasks(client, name, queues):
    """The tasks ``name`` holds now in ``queues``, oldest started first (with their progress)."""
    p = client.pipeline(transaction=False)
    for q in queues:
        p.smembers(keys.worker_tasks_key(q, name))
    out = []
    for q, ids in zip(queues, p.execute()):
        out += read_tasks(client, q, sorted(ids))
    out.sort(key=lambda t: (t.started_at is None, t.started_at))
    return out


def gone_workers(client, limit=keys.GONE_WORKERS_MAX):
    """The workers gone most recently, newest first: dicts with name, how ('stopped' or
    'reaped'), at (a datetime) and, for a stopped one, host, pid, queues, processed, failed."""
    out = []
    for raw in client.lrange(keys.GONE_WORKERS, 0, max(1, limit) - 1):
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        entry["at"] = ms_to_datetime(entry.get("at"))
        out.append(entry)
    return out
