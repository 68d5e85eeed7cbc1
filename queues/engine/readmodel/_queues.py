"""Reads of queues: which queues there are, their counts (read atomically, by the ``counts``
script: the one script the read model runs, and it writes nothing), the sweep's summary, a
queue's page, and its lists of tasks a page at a time (pending, delayed, blocked, failed,
active), its failure history and its locks."""

import json

from .. import commands, keys
from ..task import Task, ms_to_datetime
from ._common import decode, read_tasks, server_ms


def known_queues(client):
    """Names of queues that have had tasks or workers, sorted."""
    return sorted(decode(q) for q in client.smembers(keys.KNOWN_QUEUES))


def queue_counts(client, queue):
    """Counts per state and lifetime counters of one queue, read atomically (one script).

    ``pending`` includes tasks waiting for a lock (also given alone as ``waiting``; the others
    are ``runnable``); ``failed`` is the size of the failed set (tasks out of attempts);
    ``total_failed`` counts tasks that ran out of attempts, ``failures`` failed attempts;
    ``blocked`` counts tasks waiting for their parents (``after=``). The invariant:
    enqueued == completed + total_failed + cancelled + deleted + pending + delayed + active +
    blocked (+ failed tasks retried and deleted: see ``counts()``'s tests).
    """
    return commands.counts(queue).run(client).counts


def overview(client):
    """[{name, counts...}] for every known queue, in two round trips whatever their number
    (each queue's counts read atomically)."""
    names = known_queues(client)
    return [dict(counts, name=name) for name, counts in zip(names, counts_of(client, names))]


def counts_of(client, names):
    """The counts (as ``queue_counts``) of each of ``names``, in one round trip."""
    return [reply.counts for reply in commands.run_pipelined(client, [commands.counts(name) for name in names])]


def summary(client):
    """What the workers' sweep summed on its last pass over every queue (``engine.sweep``):
    {at (a datetime), queues, totals {pending, delayed, ...}, throughput (as ``throughput``),
    took_ms}, or None before the first pass."""
    raw = client.get(keys.SUMMARY)
    if raw is None:
        return None
    out = json.loads(raw)
    out["at"] = ms_to_datetime(out["at"])
    return out


#: Partitions of the ring a page of pending tasks reads at most (``pending``).
PARTITIONS_SHOWN = 100


def pending(client, queue, offset=0, limit=50, partitions=True):
    """One page of runnable tasks, in the order they will run (front, then pending), then
    (``partitions``) those listed in the partitions of the ring, partition by partition in the
    ring's order (they run interleaved, one per partition per turn; the first
    ``PARTITIONS_SHOWN`` partitions are read). Entries of tasks removed since they were listed
    are left out, so a page may be short."""
    front_key, pending_key = keys.queue_key(queue, "front"), keys.queue_key(queue, "pending")
    p = client.pipeline(transaction=False)
    p.llen(front_key)
    p.lrange(front_key, offset, offset + limit - 1)
    p.llen(pending_key)
    front_len, ids, pending_len = p.execute()
    if len(ids) < limit:
        start = max(0, offset - front_len)
        ids += client.lrange(pending_key, start, start + limit - len(ids) - 1)
    if partitions and len(ids) < limit:
        ids += _partitioned(client, queue, max(0, offset - front_len - pending_len), limit - len(ids))
    return read_tasks(client, queue, ids, state="pending")


def queue_page(client, queue, page=1, limit=50, active_limit=500, lock_limit=100):
    """What a queue's page shows, in four round trips (five with partitions) whatever it holds (the dashboard refreshes
    it several times a second under load): ``{now_ms, counts, pending, delayed, blocked,
    failed, active, locks}``, each list as ``pending()``, ``delayed()``, ``blocked()``,
    ``failed()``, ``active()`` and ``locks()`` give it (``locks`` from the same read of the
    active tasks), ``counts`` as ``queue_counts()``, and the ``page`` of pending tasks shown
    (``page`` brought within 1 and ``pages``) with its ``offset``. Pending tasks listed in partitions are read as ``pending()`` reads them."""
    now_ms = server_ms(client)
    read = commands.counts(queue).run(client)
    counts, front, listed = read.counts, read.front, read.listed
    pages = max(1, -(-counts["runnable"] // limit))
    page = min(max(1, page), pages)
    offset = (page - 1) * limit
    k = keys.queue_key
    p = client.pipeline(transaction=False)
    p.lrange(k(queue, "front"), offset, offset + limit - 1)
    start = max(0, offset - front)
    p.lrange(k(queue, "pending"), start, start + limit - 1)
    p.zrange(k(queue, "active"), 0, active_limit - 1)
    p.zrange(k(queue, "delayed"), 0, limit - 1)
    p.zrange(k(queue, "blocked"), 0, limit - 1)
    p.zrevrange(k(queue, "failed"), 0, limit - 1)
    p.zrange(k(queue, "lockwaits"), 0, lock_limit - 1)
    front_ids, pending_ids, active_ids, delayed_ids, blocked_ids, failed_ids, lockwaits = p.execute()
    ids = (front_ids + pending_ids)[:limit]
    if len(ids) < limit and read.partitioned > 0:
        ids += _partitioned(client, queue, max(0, offset - front - listed), limit - len(ids))
    lists = (ids, active_ids, delayed_ids, blocked_ids, failed_ids)
    p = client.pipeline(transaction=False)
    for part in lists:
        for tid in part:
            p.hgetall(keys.task_key(queue, decode(tid)))
    for lk in lockwaits:
        p.llen(keys.lock_wait_key(queue, decode(lk)))
    replies = iter(p.execute())
    read = []
    for part in lists:
        tasks = (Task.from_hash(decode(i), queue, next(replies)) for i in part)
        read.append([t for t in tasks if t])
    pending_tasks, active_tasks, delayed_tasks, blocked_tasks, failed_tasks = read
    pending_tasks = [t for t in pending_tasks if t.state == "pending"]
    return {
        "now_ms": now_ms,
        "counts": counts,
        "page": page,
        "pages": pages,
        "offset": offset,
        "pending": pending_tasks,
        "active": active_tasks,
        "delayed": delayed_tasks,
        "blocked": blocked_tasks,
        "failed": failed_tasks,
        "locks": _locks(active_tasks[:lock_limit], lockwaits, [next(replies) for _ in lockwaits]),
    }


def _partitioned(client, queue, skip, limit):
    ring = list(dict.fromkeys(client.lrange(keys.queue_key(queue, "ring"), 0, PARTITIONS_SHOWN - 1)))
    if not ring:
        return []
    p = client.pipeline(transaction=False)
    for part in ring:
        p.llen(keys.partition_list_key(queue, decode(part)))
    ids = []
    for part, n in zip(ring, p.execute()):
        if skip >= n:
            skip -= n
            continue
        ids += client.lrange(keys.partition_list_key(queue, decode(part)), skip, skip + limit - len(ids) - 1)
        skip = 0
        if len(ids) >= limit:
            break
    return ids


def delayed(client, queue, offset=0, limit=50):
    """One page of delayed tasks, soonest first."""
    ids = client.zrange(keys.queue_key(queue, "delayed"), offset, offset + limit - 1)
    return read_tasks(client, queue, ids)


def blocked(client, queue, offset=0, limit=50):
    """One page of blocked tasks (waiting for their parents, ``after=``), oldest first."""
    ids = client.zrange(keys.queue_key(queue, "blocked"), offset, offset + limit - 1)
    return read_tasks(client, queue, ids)


def failed(client, queue, offset=0, limit=50):
    """One page of failed (dead-letter) tasks, most recent first."""
    ids = client.zrevrange(keys.queue_key(queue, "failed"), offset, offset + limit - 1)
    return read_tasks(client, queue, ids)


def active(client, queue, limit=500):
    """Tasks in process with their worker and start time, oldest first."""
    ids = client.zrange(keys.queue_key(queue, "active"), 0, limit - 1)
    return read_tasks(client, queue, ids)


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
    held = active(client, queue, limit=limit)
    lockwaits = client.zrange(keys.queue_key(queue, "lockwaits"), 0, limit - 1)
    p = client.pipeline(transaction=False)
    for lk in lockwaits:
        p.llen(keys.lock_wait_key(queue, decode(lk)))
    return _locks(held, lockwaits, p.execute())


def _locks(active_tasks, lockwaits, waiting):
    held = {}
    for task in active_tasks:
        if task.lock:
            held[task.lock] = {"lock": task.lock, "holder": task.id, "worker": task.worker, "waiting": 0}
    for lk, n in zip(lockwaits, waiting):
        entry = held.setdefault(decode(lk), {"lock": decode(lk), "holder": None, "worker": None, "waiting": 0})
        entry["waiting"] = n
    return sorted(held.values(), key=lambda e: (-e["waiting"], e["lock"]))


def is_paused(client, queue):
    """Whether ``queue`` is paused."""
    return bool(client.hexists(keys.queue_key(queue, "meta"), "paused"))


def queue_exists(client, queue):
    """Whether ``queue`` has had tasks or workers."""
    return bool(client.sismember(keys.KNOWN_QUEUES, queue))


def failed_ids(client, queue, limit):
    """Ids of up to ``limit`` failed tasks, oldest failure first."""
    return [decode(i) for i in client.zrange(keys.queue_key(queue, "failed"), 0, limit - 1)]


def failures_signature(client, queue):
    """Changes whenever the failure history does (it only grows at its head, then is trimmed):
    its length and newest entry, read without reading the (up to 100) entries."""
    key = keys.queue_key(queue, "failures")
    p = client.pipeline(transaction=False)
    p.llen(key)
    p.lindex(key, 0)
    return tuple(p.execute())


def in_flight(client, queue, worker=None, limit=10000):
    """Ids of the tasks of ``queue`` in process: those ``worker`` holds, or (None) all the active
    ones, at most ``limit`` (the chaos soak's record of what a fault strands)."""
    if worker is not None:
        return [decode(i) for i in client.srandmember(keys.worker_tasks_key(queue, worker), limit)]
    return [decode(i) for i in client.zrange(keys.queue_key(queue, "active"), 0, limit - 1)]
