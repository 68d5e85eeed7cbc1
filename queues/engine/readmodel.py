"""The read model: what dashboards, commands and the HTTP API show. Reads only, never scans:
every list is read a page at a time and every count is a length kept by Redis.
"""

import json

from . import keys
from .task import Task, ms_to_datetime

_STAT_NAMES = ("enqueued", "completed", "failed", "failures", "retried", "cancelled", "deleted", "waiting")


def _decode(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def known_queues(client):
    """Names of queues that have had tasks or workers, sorted."""
    return sorted(_decode(q) for q in client.smembers(keys.KNOWN_QUEUES))


def _queue_reads(p, queue):
    p.llen(keys.queue_key(queue, "pending"))
    p.zcard(keys.queue_key(queue, "delayed"))
    p.zcard(keys.queue_key(queue, "active"))
    p.zcard(keys.queue_key(queue, "failed"))
    p.hgetall(keys.queue_key(queue, "stats"))
    p.hexists(keys.queue_key(queue, "meta"), "paused")


def _counts(replies):
    pending, delayed, active, failed, stats, paused = replies
    counts = {name: int(stats.get(name.encode(), 0)) for name in _STAT_NAMES}
    counts["waiting"] = max(counts["waiting"], 0)
    counts["total_failed"] = counts.pop("failed")
    counts.update(pending=pending + counts["waiting"], delayed=delayed, active=active, failed=failed)
    counts["paused"] = bool(paused)
    return counts


def queue_counts(client, queue):
    """Counts per state and lifetime counters of one queue, in one round trip.

    ``pending`` includes tasks waiting for a lock (also given as ``waiting``); ``failed`` is
    the size of the failed set (tasks out of attempts); ``total_failed`` counts tasks that ran
    out of attempts, ``failures`` failed attempts.
    """
    p = client.pipeline(transaction=False)
    _queue_reads(p, queue)
    return _counts(p.execute())


def overview(client):
    """[{name, counts...}] for every known queue, in two round trips whatever their number."""
    names = known_queues(client)
    p = client.pipeline(transaction=False)
    for name in names:
        _queue_reads(p, name)
    replies = p.execute()
    return [dict(_counts(replies[6 * i:6 * i + 6]), name=name) for i, name in enumerate(names)]


def _tasks(client, queue, ids):
    p = client.pipeline(transaction=False)
    for tid in ids:
        p.hgetall(keys.task_key(queue, _decode(tid)))
    return [t for t in (Task.from_hash(_decode(i), queue, h) for i, h in zip(ids, p.execute())) if t]


def pending(client, queue, offset=0, limit=50):
    """One page of pending tasks, in the order they will run."""
    ids = client.lrange(keys.queue_key(queue, "pending"), offset, offset + limit - 1)
    return _tasks(client, queue, ids)


def delayed(client, queue, offset=0, limit=50):
    """One page of delayed tasks, soonest first."""
    ids = client.zrange(keys.queue_key(queue, "delayed"), offset, offset + limit - 1)
    return _tasks(client, queue, ids)


def failed(client, queue, offset=0, limit=50):
    """One page of failed (dead-letter) tasks, most recent first."""
    ids = client.zrevrange(keys.queue_key(queue, "failed"), offset, offset + limit - 1)
    return _tasks(client, queue, ids)


def active(client, queue, limit=500):
    """Tasks in process with their worker and start time, oldest first."""
    ids = client.zrange(keys.queue_key(queue, "active"), 0, limit - 1)
    return _tasks(client, queue, ids)


def failures(client, queue, limit=100):
    """The failure history, newest first (dicts: id, payload, error, traceback, attempts,
    worker, failed_at)."""
    out = []
    for raw in client.lrange(keys.queue_key(queue, "failures"), 0, max(limit, 1) - 1):
        entry = json.loads(raw.decode("utf-8", "replace"))
        if entry.get("traceback") == {}:  # cjson encodes an empty string field oddly in places
            entry["traceback"] = ""
        entry["failed_at"] = ms_to_datetime(entry.get("failed_at"))
        out.append(entry)
    return out


def locks(client, queue, limit=100):
    """Locks held (by active tasks) and how many tasks wait on each lock."""
    held = {}
    for task in active(client, queue, limit=limit):
        if task.lock:
            held[task.lock] = {"lock": task.lock, "holder": task.id, "worker": task.worker, "waiting": 0}
    lockwaits = client.zrange(keys.queue_key(queue, "lockwaits"), 0, limit - 1)
    p = client.pipeline(transaction=False)
    for lk in lockwaits:
        p.llen(keys.lock_wait_key(queue, _decode(lk)))
    for lk, n in zip(lockwaits, p.execute()):
        entry = held.setdefault(_decode(lk), {"lock": _decode(lk), "holder": None, "worker": None, "waiting": 0})
        entry["waiting"] = n
    return sorted(held.values(), key=lambda e: (-e["waiting"], e["lock"]))


def throughput(client, queue, minutes=60):
    """[(minute start datetime, completed, failed)] for the last ``minutes`` minutes."""
    now_s, _ = client.time()
    m_now = int(now_s) // 60
    fields = []
    for m in range(m_now - minutes + 1, m_now + 1):
        fields += [f"c{m}", f"f{m}"]
    values = client.hmget(keys.queue_key(queue, "throughput"), fields)
    out = []
    for i, m in enumerate(range(m_now - minutes + 1, m_now + 1)):
        out.append((ms_to_datetime(m * 60000), int(values[2 * i] or 0), int(values[2 * i + 1] or 0)))
    return out


def workers(client):
    """Live workers: name, host, pid, queues, concurrency, processed, failed, active,
    started, and heartbeat age in seconds. Names whose heartbeat key is gone are pruned."""
    names = sorted(_decode(n) for n in client.smembers(keys.WORKER_REGISTRY))
    if not names:
        return []
    p = client.pipeline(transaction=False)
    for name in names:
        p.get(keys.heartbeat_key(name))
        p.pttl(keys.heartbeat_key(name))
    replies = p.execute()
    out, gone = [], []
    for i, name in enumerate(names):
        raw, pttl = replies[2 * i], replies[2 * i + 1]
        if raw is None:
            gone.append(name)
            continue
        info = json.loads(raw)
        ttl_ms = int(info.get("ttl_ms", 3000))
        info["name"] = name
        info["heartbeat_age"] = max(0.0, (ttl_ms - max(pttl, 0)) / 1000)
        out.append(info)
    if gone:
        client.srem(keys.WORKER_REGISTRY, *gone)
    return out


def task(client, task_id):
    """Look a task up by id alone (the id names its queue); None if unknown."""
    queue = keys.queue_from_task_id(task_id)
    if queue is None:
        return None
    return Task.from_hash(task_id, queue, client.hgetall(keys.task_key(queue, task_id)))
