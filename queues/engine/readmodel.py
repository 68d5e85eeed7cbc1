"""The read model: every read of Redis that dashboards, commands, metrics and the HTTP API
show, and the only place besides the scripts that knows the keys' layout and the task hash's
field names. Reads only, never unbounded scans: every list is read a page at a time and every
count is a length or a counter kept by Redis; a search (``search``) looks at a bounded number of
entries per call and returns a cursor to go on. Counts are read in one MULTI, so they are
consistent.
"""

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from . import commands, keys
from . import durations as _durations
from .budget import Budget
from .connection import is_cluster
from .limits import start_grace_ms
from .task import Task, ms_to_datetime


def _decode(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def known_queues(client):
    """Names of queues that have had tasks or workers, sorted."""
    return sorted(_decode(q) for q in client.smembers(keys.KNOWN_QUEUES))


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


def _tasks(client, queue, ids, state=None):
    p = client.pipeline(transaction=False)
    for tid in ids:
        p.hgetall(keys.task_key(queue, _decode(tid)))
    tasks = (Task.from_hash(_decode(i), queue, h) for i, h in zip(ids, p.execute()))
    return [t for t in tasks if t and (state is None or t.state == state)]


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
    return _tasks(client, queue, ids, state="pending")


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
            p.hgetall(keys.task_key(queue, _decode(tid)))
    for lk in lockwaits:
        p.llen(keys.lock_wait_key(queue, _decode(lk)))
    replies = iter(p.execute())
    read = []
    for part in lists:
        tasks = (Task.from_hash(_decode(i), queue, next(replies)) for i in part)
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
        p.llen(keys.partition_list_key(queue, _decode(part)))
    ids = []
    for part, n in zip(ring, p.execute()):
        if skip >= n:
            skip -= n
            continue
        ids += client.lrange(keys.partition_list_key(queue, _decode(part)), skip, skip + limit - len(ids) - 1)
        skip = 0
        if len(ids) >= limit:
            break
    return ids


def delayed(client, queue, offset=0, limit=50):
    """One page of delayed tasks, soonest first."""
    ids = client.zrange(keys.queue_key(queue, "delayed"), offset, offset + limit - 1)
    return _tasks(client, queue, ids)


def blocked(client, queue, offset=0, limit=50):
    """One page of blocked tasks (waiting for their parents, ``after=``), oldest first."""
    ids = client.zrange(keys.queue_key(queue, "blocked"), offset, offset + limit - 1)
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
    held = active(client, queue, limit=limit)
    lockwaits = client.zrange(keys.queue_key(queue, "lockwaits"), 0, limit - 1)
    p = client.pipeline(transaction=False)
    for lk in lockwaits:
        p.llen(keys.lock_wait_key(queue, _decode(lk)))
    return _locks(held, lockwaits, p.execute())


def _locks(active_tasks, lockwaits, waiting):
    held = {}
    for task in active_tasks:
        if task.lock:
            held[task.lock] = {"lock": task.lock, "holder": task.id, "worker": task.worker, "waiting": 0}
    for lk, n in zip(lockwaits, waiting):
        entry = held.setdefault(_decode(lk), {"lock": _decode(lk), "holder": None, "worker": None, "waiting": 0})
        entry["waiting"] = n
    return sorted(held.values(), key=lambda e: (-e["waiting"], e["lock"]))


def throughput(client, queues, minutes=60, now_ms=None):
    """Completed and failed attempts per minute over the last ``minutes``, summed over
    ``queues``, in one round trip: {start_ms, completed: [...], failed: [...]} (oldest first)."""
    now_ms = server_ms(client) if now_ms is None else now_ms
    m_now = now_ms // 60000
    span = range(m_now - minutes + 1, m_now + 1)
    fields = [f"{kind}{m}" for m in span for kind in ("c", "f")]
    p = client.pipeline(transaction=False)
    for q in queues:
        p.hmget(keys.queue_key(q, "throughput"), fields)
    completed, failed = [0] * minutes, [0] * minutes
    for values in p.execute():
        for i in range(minutes):
            completed[i] += int(values[2 * i] or 0)
            failed[i] += int(values[2 * i + 1] or 0)
    return {"start_ms": span[0] * 60000, "completed": completed, "failed": failed}


def server_ms(client):
    """Redis's clock, in Unix ms (every time worqr stores comes from it)."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def durations(client, queues):
    """{queue: (cumulative [(bound text, count)] ending with '+Inf', sum of seconds)} for the
    queues that have recorded runs."""
    p = client.pipeline(transaction=False)
    for queue in queues:
        p.hgetall(keys.queue_key(queue, "durations"))
    out = {}
    for queue, h in zip(queues, p.execute(), strict=True):
        if not h:
            continue
        total, buckets = 0, []
        for bound in (*_durations.BUCKETS, None):
            text = _durations.bound_text(bound)
            total += int(h.get(f"le:{text}".encode(), 0))
            buckets.append((text, total))
        out[queue] = (buckets, float(h.get(b"sum", 0)))
    return out


def is_paused(client, queue):
    return bool(client.hexists(keys.queue_key(queue, "meta"), "paused"))


def queue_exists(client, queue):
    """Whether ``queue`` has had tasks or workers."""
    return bool(client.sismember(keys.KNOWN_QUEUES, queue))


def bulk_job(client, job_id):
    """The fields of a dashboard bulk job's progress record (``keys.bulk_job_key``) as text, or
    None if there is none (unknown, or expired)."""
    raw = client.hgetall(keys.bulk_job_key(job_id))
    return {_decode(k): _decode(v) for k, v in raw.items()} or None


def subscriber_connections(client):
    """How many connections to the (node of the) client hold a pub/sub subscription."""
    return sum(1 for c in client.client_list() if int(c.get("sub", 0)) + int(c.get("psub", 0)))


def failed_ids(client, queue, limit):
    """Ids of up to ``limit`` failed tasks, oldest failure first."""
    return [_decode(i) for i in client.zrange(keys.queue_key(queue, "failed"), 0, limit - 1)]


def failures_signature(client, queue):
    """Changes whenever the failure history does (it only grows at its head, then is trimmed):
    its length and newest entry, read without reading the (up to 100) entries."""
    key = keys.queue_key(queue, "failures")
    p = client.pipeline(transaction=False)
    p.llen(key)
    p.lindex(key, 0)
    return tuple(p.execute())


def workers_active(client, pairs):
    """How many tasks each (worker, queue) pair holds right now, in one round trip."""
    p = client.pipeline(transaction=False)
    for worker, queue in pairs:
        p.scard(keys.worker_tasks_key(queue, worker))
    return p.execute()


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
    for name in gone:  # died without stopping (its heartbeat key expired): remembered once
        if client.srem(keys.WORKER_REGISTRY, name):
            remember_gone(client, {"name": name, "how": "reaped"})
    return out


def remember_gone(client, entry):
    """Add a gone worker (``entry``: name, how: 'stopped' or 'reaped', ...) to the list of the
    last ``keys.GONE_WORKERS_MAX``, stamped with Redis's time. The one write of this module,
    made where a gone worker is noticed (sync clients only; the worker has its own)."""
    entry = dict(entry, at=server_ms(client))
    p = client.pipeline(transaction=False)
    p.lpush(keys.GONE_WORKERS, json.dumps(entry))
    p.ltrim(keys.GONE_WORKERS, 0, keys.GONE_WORKERS_MAX - 1)
    p.execute()


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


def worker(client, name):
    """One live worker's heartbeat info (as ``workers`` gives it), or None."""
    raw = client.get(keys.heartbeat_key(name))
    if raw is None:
        return None
    info = json.loads(raw)
    info["name"] = name
    return info


def worker_tasks(client, name, queues):
    """The tasks ``name`` holds now in ``queues``, oldest started first (with their progress)."""
    p = client.pipeline(transaction=False)
    for q in queues:
        p.smembers(keys.worker_tasks_key(q, name))
    out = []
    for q, ids in zip(queues, p.execute()):
        out += _tasks(client, q, sorted(ids))
    out.sort(key=lambda t: (t.started_at is None, t.started_at))
    return out


def task_log(client, task_id, limit=keys.TASK_LOG_MAX):
    """The last ``limit`` lines of a task's log (``task.log``), oldest first."""
    queue = keys.queue_from_task_id(task_id)
    if queue is None:
        return []
    return [_decode(line) for line in client.lrange(keys.task_log_key(queue, task_id), -max(1, limit), -1)]


def tagged(client, queue, tag, offset=0, limit=50, newest_first=True):
    """One page of the tasks of ``queue`` carrying ``tag`` (live or failed), newest first:
    read from the tag index, so it costs O(page), whatever the queue's size."""
    key = keys.tag_key(queue, tag)
    fetch = client.zrevrange if newest_first else client.zrange
    return _tasks(client, queue, fetch(key, offset, offset + limit - 1))


def tagged_count(client, queue, tag):
    """How many tasks of ``queue`` carry ``tag``."""
    return client.zcard(keys.tag_key(queue, tag))


def task(client, task_id):
    """Look a task up by id alone (the id names its queue); None if unknown."""
    queue = keys.queue_from_task_id(task_id)
    if queue is None:
        return None
    return Task.from_hash(task_id, queue, client.hgetall(keys.task_key(queue, task_id)))


# -- schedules (periodic tasks) --------------------------------------------------------------


def schedule_index(client):
    """{schedule name: queue} of every schedule (the global index ``keys.SCHEDULES``)."""
    return {_decode(k): _decode(v) for k, v in client.hgetall(keys.SCHEDULES).items()}


def _schedules(client, pairs):
    from .schedules import Schedule

    p = client.pipeline(transaction=False)
    for name, queue in pairs:
        p.hgetall(keys.schedule_key(queue, name))
        p.zscore(keys.queue_key(queue, "schedules"), name)
    replies = p.execute()
    found = (
        Schedule.from_hash(name, queue, replies[2 * i], replies[2 * i + 1]) for i, (name, queue) in enumerate(pairs)
    )
    return [s for s in found if s is not None]


def schedules(client):
    """Every schedule (``schedules.Schedule``), sorted by name, in two round trips."""
    return _schedules(client, sorted(schedule_index(client).items()))


def schedule(client, name):
    """The schedule called ``name``, or None."""
    queue = client.hget(keys.SCHEDULES, name)
    if queue is None:
        return None
    found = _schedules(client, [(name, _decode(queue))])
    return found[0] if found else None


def task_states(client, task_ids):
    """{id: state, or None once the task is gone (finished)} in one round trip."""
    ids = [i for i in task_ids if keys.queue_from_task_id(i)]
    p = client.pipeline(transaction=False)
    for task_id in ids:
        p.hmget(keys.task_key(keys.queue_from_task_id(task_id), task_id), "s", "c")
    return {task_id: _state(*fields) for task_id, fields in zip(ids, p.execute() if ids else [])}


def _state(s, c):
    """A task's state from its fields ``s`` and ``c``: no ``s`` is pending (``task.py``), no
    ``c`` either is no task (None)."""
    return _decode(s) if s is not None else ("pending" if c is not None else None)


# -- workflows (after=, batches) -------------------------------------------------------------


def outbox(client, queue, limit=100, before_ms=None):
    """Ids of ended tasks of ``queue`` whose children or batch are still to be told, oldest
    first; only those that ended before ``before_ms`` if given (a sweep leaves the newest to the
    worker that ended them)."""
    top = "+inf" if before_ms is None else f"({int(before_ms)}"
    return [_decode(i) for i in client.zrangebyscore(keys.queue_key(queue, "outbox"), "-inf", top, 0, limit)]


def links(client, queue, task_id):
    """A task's links: {outcome: its end or None, batch: id or None, why: reason or None,
    children: [ids]} (None if it has none)."""
    return links_many(client, queue, [task_id])[0]


def links_many(client, queue, ids):
    """``links`` of several tasks of ``queue``, in one round trip, in order."""
    p = client.pipeline(transaction=False)
    for task_id in ids:
        p.hgetall(keys.links_key(queue, task_id))
    out = []
    for raw in p.execute() if ids else []:
        if not raw:
            out.append(None)
            continue
        h = {_decode(k): _decode(v) for k, v in raw.items()}
        children = sorted(k for k in h if k not in ("=", "b", "why", "rt"))
        out.append({"outcome": h.get("="), "batch": h.get("b"), "why": h.get("why"), "children": children})
        if "rt" in h:  # the traceparent of the run span that ended it (tracing on)
            out[-1]["run"] = h["rt"]
    return out


def task_ends(client, ids):
    """{id: state} of tasks of any queues, in one round trip: the task's state if it is in
    Redis, else its recorded end (completed, failed, cancelled, deleted: for a task that had
    children or a batch, for a day; for any other, while its queue's record of ended tasks keeps
    it: ``keys.ENDED_MAX`` of them, for ``keys.ENDED_KEEP_MS`` at most), else None (unknown)."""
    ids = list(ids)
    p = client.pipeline(transaction=False)
    for tid in ids:
        q = keys.queue_from_task_id(tid)
        p.hmget(keys.task_key(q, tid), "s", "c")
        p.hget(keys.links_key(q, tid), "=")
        p.zscore(keys.queue_key(q, "ended"), tid[-16:])
    replies = p.execute()
    return {
        tid: _state(*replies[3 * i]) or _decode(replies[3 * i + 1]) or _ended_outcome(replies[3 * i + 2])
        for i, tid in enumerate(ids)
    }


def _ended_outcome(score):
    """The outcome an ``ended`` score records (end time ms * 4 + its code), or None."""
    return None if score is None else keys.ENDED_OUTCOMES[int(score) % 4]


def parents(client, queue, task_id):
    """{parent id: 'w' (not told yet) or its outcome} of a blocked task (empty once released)."""
    raw = client.hgetall(keys.parents_key(queue, task_id))
    return {_decode(k): _decode(v) for k, v in raw.items()}


def batch(client, batch_id):
    """One batch as a dict (None if unknown): id, description, state, total, pending, active,
    completed, failed, cancelled, created_at, finished_at, closed, cancel_requested, callbacks
    ({on_success, on_complete}: [queue, payload] or None) and its queues. ``active`` sums the
    per-queue counters of its running tasks; ``pending`` is the rest of the unfinished ones."""
    p = client.pipeline(transaction=False)
    p.hgetall(keys.batch_key(batch_id, "batch"))
    p.smembers(keys.batch_key(batch_id, "queues"))
    raw, queues = p.execute()
    if not raw:
        return None
    h = {_decode(k): _decode(v) for k, v in raw.items()}
    queues = sorted(_decode(q) for q in queues)
    p = client.pipeline(transaction=False)
    for q in queues:
        p.hget(keys.queue_key(q, "batchruns"), batch_id)
    active = sum(int(n or 0) for n in p.execute()) if queues else 0
    n = {k: int(h.get(k) or 0) for k in ("total", "completed", "failed", "cancelled")}
    unfinished = max(0, n["total"] - n["completed"] - n["failed"] - n["cancelled"])
    active = max(0, min(active, unfinished))

    def callback(field):
        if not h.get(field):
            return None
        queue, payload, _kind = json.loads(h[field])
        return [queue, payload]

    return dict(
        id=batch_id,
        description=h.get("d", ""),
        state=h.get("st", "open"),
        **n,
        pending=unfinished - active,
        active=active,
        created_at=ms_to_datetime(h.get("c")),
        finished_at=ms_to_datetime(h.get("fin")),
        closed=bool(h.get("closed")),
        cancel_requested=bool(h.get("x")),
        callbacks_enqueued=h.get("cb") == "done",
        on_success=callback("os"),
        on_complete=callback("oc"),
        queues=queues,
    )


def batch_tasks(client, batch_id, offset=0, limit=50):
    """One page of a batch's task ids, in the order they were added."""
    return [_decode(i) for i in client.lrange(keys.batch_key(batch_id, "tasks"), offset, offset + limit - 1)]


def batch_live(client, batch_id, cursor=0, count=500):
    """(next cursor, ids) of a batch's unfinished tasks, a page at a time (SSCAN)."""
    cursor, ids = client.sscan(keys.batch_key(batch_id, "live"), cursor, count=count)
    return int(cursor), [_decode(i) for i in ids]


def batches(client, offset=0, limit=50):
    """One page of batch ids, newest first, and how many there are."""
    p = client.pipeline(transaction=False)
    p.zrevrange(keys.BATCHES, offset, offset + limit - 1)
    p.zcard(keys.BATCHES)
    ids, total = p.execute()
    return [_decode(i) for i in ids], total


def batches_due(client, limit=20, before_ms=None):
    """Ids of batches whose callbacks may still be due (closed, not yet enqueued), oldest first."""
    top = "+inf" if before_ms is None else f"({int(before_ms)}"
    return [_decode(i) for i in client.zrangebyscore(keys.BATCHES_DUE, "-inf", top, 0, limit)]


_LIMIT_FIELDS = (("concurrency", "c", None), ("rate", "rn", "rw"))
_PARTITION_FIELDS = (("partition_concurrency", "pc", None), ("partition_rate", "prn", "prw"))


def _limit_values(h, prefix):
    """{concurrency, rate, partition_concurrency, partition_rate} from the limits hash's fields
    with ``prefix`` ('' in force, 'h' the handler's, 'o' the overrides: '-' is "none")."""
    out = {}
    for name, count, window in _LIMIT_FIELDS + _PARTITION_FIELDS:
        raw = h.get(prefix + count)
        if raw is None:
            continue
        if raw == "-" or raw == "":
            out[name] = None
        elif window is None:
            out[name] = int(raw)
        else:
            out[name] = [int(raw), int(h.get(prefix + window) or 0) / 1000]
    return out


def limited_queues(client, names):
    """Those of ``names`` that have limits in force (or overrides), in one round trip."""
    p = client.pipeline(transaction=False)
    for name in names:
        p.exists(keys.queue_key(name, "limits"))
    return [name for name, found in zip(names, p.execute()) if found]


#: Parked partitions of each kind (by their concurrency, by their rate) whose tasks ``limits``
#: counts: bounded work per call.
PARKED_COUNTED = 1000


def _parked(client, queue, partition_concurrency):
    """Partitions parked by their concurrency (at most PARKED_COUNTED looked at: those at their
    limit in ``pactive``), and the tasks listed in those and in the ones parked by their rate."""
    parked = list(client.zrange(keys.queue_key(queue, "pwait"), 0, PARKED_COUNTED - 1))
    at_concurrency = 0
    if partition_concurrency is not None:
        at_limit = client.zrangebyscore(
            keys.queue_key(queue, "pactive"), partition_concurrency, "+inf", start=0, num=PARKED_COUNTED
        )
        if at_limit:
            states = client.hmget(keys.queue_key(queue, "partitions"), at_limit)
            blocked = [k for k, state in zip(at_limit, states, strict=True) if _decode(state) == "b"]
            at_concurrency = len(blocked)
            parked += blocked
    if not parked:
        return at_concurrency, 0
    p = client.pipeline(transaction=False)
    for k in parked:
        p.llen(keys.partition_list_key(queue, _decode(k)))
    return at_concurrency, sum(p.execute())


def limits(client, queue, busiest=10):
    """The queue's limits and their use: the limits in force (``concurrency``, ``rate`` as
    [starts, seconds], ``partition_concurrency``, ``partition_rate``; None: no limit), where they
    come from (``handler``, ``overrides``), ``active`` (the slots in use under the concurrency:
    active tasks, and ``kept``: handlers still running after their outcome was recorded, a
    timeout or a cancel of a sync handler, until they return), ``starts_in_window`` (None without
    a rate), ``held_back`` (runnable tasks the queue's own limits hold back now), and
    ``partitions``: listed (with tasks runnable), in the ring, held back, parked by their
    concurrency (``at_concurrency``) and by their rate (``rate_waiting``), the tasks listed in
    parked partitions (``held_back_tasks``: entries of removed tasks included; at most
    ``PARKED_COUNTED`` partitions of each kind are counted, a lower bound beyond), the most
    active tasks of one partition (``most_active``) and the busiest."""
    lk = keys.queue_key(queue, "limits")
    if is_cluster(client):  # a cluster transaction takes no keyless command: TIME goes alone
        raw, (secs, micros) = client.hgetall(lk), client.time()
    else:
        p = client.pipeline(transaction=True)
        p.hgetall(lk)
        p.time()
        raw, (secs, micros) = p.execute()
    h = {_decode(k): _decode(v) for k, v in raw.items()}
    now = secs * 1000 + micros // 1000
    in_force = {name: None for name, _, _ in _LIMIT_FIELDS + _PARTITION_FIELDS}
    in_force.update(_limit_values(h, ""))
    handler = {name: None for name in in_force}
    handler.update(_limit_values(h, "h"))
    p = client.pipeline(transaction=True)
    p.zcard(keys.queue_key(queue, "active"))
    p.hlen(keys.queue_key(queue, "kept"))
    rate = in_force["rate"]
    window = int(h.get("rw") or 0)
    window += start_grace_ms(window) if window else 0  # what Redis counts starts over
    p.zcount(keys.queue_key(queue, "starts"), f"({now - window}", "+inf")
    p.hlen(keys.queue_key(queue, "partitions"))
    p.llen(keys.queue_key(queue, "ring"))
    p.zcard(keys.queue_key(queue, "pwait"))
    p.zrevrange(keys.queue_key(queue, "pactive"), 0, max(busiest, 1) - 1, withscores=True)
    active, kept, starts, listed, ring, rate_waiting, top = p.execute()
    active += kept
    at_concurrency, held_back_tasks = _parked(client, queue, in_force["partition_concurrency"]) if listed else (0, 0)
    counts = queue_counts(client, queue)
    room = None
    if in_force["concurrency"] is not None:
        room = in_force["concurrency"] - active
    if rate is not None:
        room = min(rate[0] - starts, room if room is not None else rate[0] - starts)
    held_back = counts["runnable"] if room is not None and room <= 0 else 0
    return dict(
        in_force,
        handler=handler,
        overrides=_limit_values(h, "o"),
        active=active,
        kept=kept,
        starts_in_window=starts if rate is not None else None,
        held_back=held_back,
        runnable=counts["runnable"],
        partitions={
            "listed": listed,
            "in_ring": ring,
            "held_back": max(0, listed - ring),
            "rate_waiting": rate_waiting,
            "at_concurrency": at_concurrency,
            "held_back_tasks": held_back_tasks,
            "most_active": int(top[0][1]) if top else 0,
            "busiest": [{"key": _decode(k), "active": int(n)} for k, n in top][:busiest],
        },
    )


# -- search ------------------------------------------------------------------------------------

#: The qualifiers a search understands; anything else is free text (over payloads and errors).
SEARCH_QUALIFIERS = ("queue", "state", "error", "tag", "worker", "before", "after")
SEARCH_STATES = ("pending", "delayed", "waiting", "blocked", "active", "failed", "completed")
#: Where each state's tasks are listed, in the order a search looks: (state, source kind).
_SOURCES = (
    ("active", "active"),
    ("failed", "failed"),
    ("pending", "front"),
    ("pending", "pending"),
    ("delayed", "delayed"),
    ("waiting", "lockwaits"),
    ("blocked", "blocked"),
    ("completed", "results"),
)
_TOKEN = re.compile(r'(?:(\w+):)?("(?:[^"\\]|\\.)*"|\S+)')


class SearchError(ValueError):
    """A malformed search: the message says what is wrong."""


@dataclass
class Search:
    """A parsed search (``parse_search``): each qualifier's values, and the free-text words."""

    queues: list = field(default_factory=list)
    states: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    tags: list = field(default_factory=list)
    workers: list = field(default_factory=list)
    before_ms: int | None = None
    after_ms: int | None = None
    words: list = field(default_factory=list)

    @property
    def only_sets(self):
        """Whether the search needs no task's content (queue and state alone): totals are counts."""
        return not (self.errors or self.tags or self.workers or self.words) and self.before_ms is self.after_ms is None


def _when(name, text):
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise SearchError(f"{name}: {text!r} is not a date or time (2026-11-20, or 2026-11-20T14:30)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def parse_search(text):
    """Parse ``queue:emails state:failed error:"SMTP" tag:customer:42 worker:host-1
    before:2026-11-20 after:2026-11-19T12:00 free words`` into a ``Search``; a quoted value may
    hold spaces. Raises SearchError (a message for the user) for a bad queue name, state or date."""
    if not isinstance(text, str) or len(text) > 1000:
        raise SearchError("a search is a text of at most 1,000 characters")
    s = Search()
    for name, raw in _TOKEN.findall(text):
        value = raw[1:-1].replace('\\"', '"') if len(raw) >= 2 and raw[0] == raw[-1] == '"' else raw
        name = name.lower()
        if name and name not in SEARCH_QUALIFIERS:
            value, name = f"{name}:{value}", ""  # "http://..." or "a:b" in a payload: free text
        if not value:
            continue
        if name == "queue":
            try:
                s.queues.append(keys.check_queue_name(value))
            except ValueError:
                raise SearchError(f"queue: {value!r} is not a queue name") from None
        elif name == "state":
            if value not in SEARCH_STATES:
                raise SearchError(f"state: {value!r} is not one of {', '.join(SEARCH_STATES)}")
            s.states.append(value)
        elif name == "error":
            s.errors.append(value.lower())
        elif name == "tag":
            s.tags.append(value)
        elif name == "worker":
            s.workers.append(value)
        elif name == "before":
            s.before_ms = _when("before", value)
        elif name == "after":
            s.after_ms = _when("after", value)
        else:
            s.words.append(value.lower())
    return s


@dataclass
class SearchPage:
    """One request's worth of a search: the tasks found, where to go on (``cursor``, None when
    everything was looked at), how many entries were looked at, and the total when it is known
    without scanning (a search by tag or by queue and state alone, over at most
    ``TOTAL_QUEUES`` queues; else None); the Redis round trips it took, why it stopped before
    the end or a full page (``budget.ROUND_TRIPS``, ``TIME``, ``GONE``, ``"scan limit"``; None),
    and how many of the queues searched it reached."""

    tasks: list
    cursor: str | None
    scanned: int
    total: int | None = None
    round_trips: int = 0
    stopped: str | None = None
    queues_reached: int = 0
    queues: int = 0


#: Lists whose sizes one round trip asks for (a search skips the empty ones without reading them).
PROBED = 1000
#: A search's total is counted (from each queue's counts) over at most this many queues.
TOTAL_QUEUES = 1000


def _matches(s, t, tags):
    if s.states and t.state not in s.states:
        return False
    if s.workers and not any((t.worker or "").startswith(w) for w in s.workers):  # a name, or its start
        return False
    if any(tag not in tags for tag in s.tags):
        return False
    created = int(t.created_at.timestamp() * 1000) if t.created_at else None
    if s.before_ms is not None and (created is None or created >= s.before_ms):
        return False
    if s.after_ms is not None and (created is None or created < s.after_ms):
        return False
    error = (t.error or "").lower()
    if any(e not in error for e in s.errors):
        return False
    if s.words:
        payload = t.payload.decode("utf-8", "replace") if isinstance(t.payload, bytes) else (t.payload or "")
        text = payload.lower() + "\n" + error
        if any(w not in text for w in s.words):
            return False
    return True


def _sources(s, queues):
    """(queue, kind, key) of each list a search reads, in order."""
    out = []
    for q in queues:
        if s.tags:  # the index of the first tag: O(results); the other qualifiers filter
            out.append((q, "tag", keys.tag_key(q, s.tags[0])))
            continue
        for state, kind in _SOURCES:
            if not s.states or state in s.states:
                out.append((q, kind, keys.queue_key(q, kind)))
    return out


def _read_source(client, queue, kind, key, offset, count):
    """Up to ``count`` ids from one source from ``offset``; (ids, entries looked at, done)."""
    if kind in ("front", "pending"):
        ids = client.lrange(key, offset, offset + count - 1)
    elif kind in ("failed", "tag", "results"):
        ids = client.zrevrange(key, offset, offset + count - 1)
    elif kind == "lockwaits":  # one lock's wait list per entry (each list read whole, capped)
        locks = client.zrange(key, offset, offset + count - 1)
        p = client.pipeline(transaction=False)
        for lk in locks:
            p.lrange(keys.lock_wait_key(queue, _decode(lk)), 0, 999)
        ids = [i for waiting in p.execute() for i in waiting]
        return ids, len(locks), len(locks) < count
    else:  # active, delayed, blocked: oldest / soonest first
        ids = client.zrange(key, offset, offset + count - 1)
    return ids, len(ids), len(ids) < count


def _sizes(client, sources, start):
    """{index: entries} of the ``PROBED`` sources from ``start``, in one round trip."""
    p = client.pipeline(transaction=False)
    at = range(start, min(start + PROBED, len(sources)))
    for i in at:
        _, kind, key = sources[i]
        p.llen(key) if kind in ("front", "pending") else p.zcard(key)
    return dict(zip(at, p.execute()))


def search_total(client, s, queues):
    """How many tasks match ``s`` when counts alone tell (one tag and nothing else but queues,
    or queues and states alone), over at most ``TOTAL_QUEUES`` queues, in two round trips;
    else None."""
    if len(queues) > TOTAL_QUEUES:
        return None
    p = client.pipeline(transaction=False)
    if _tag_only(s):
        for q in queues:
            p.zcard(keys.tag_key(q, s.tags[0]))
        return sum(p.execute())
    if not s.only_sets:
        return None
    for q in queues:
        p.zcard(keys.queue_key(q, "results"))
    kept = p.execute()
    total = 0
    for results, counts in zip(kept, counts_of(client, queues)):
        per_state = {
            "pending": counts["runnable"],
            "waiting": counts["waiting"],
            "delayed": counts["delayed"],
            "active": counts["active"],
            "blocked": counts["blocked"],
            "failed": counts["failed"],
            "completed": results,
        }
        total += sum(per_state[state] for state in (s.states or SEARCH_STATES))
    return total


def _tag_only(s):
    return len(s.tags) == 1 and not (s.states or s.errors or s.workers or s.words) and s.before_ms is s.after_ms is None


def search(client, text_or_search, cursor=None, scan_limit=10000, page_size=50, ids_only=False, budget=None):
    """Run a search (a text for ``parse_search``, or a ``Search``) for one request: look at
    at most ``scan_limit`` entries (tasks read in pipelines of at most 500), from ``cursor`` (a
    previous page's), and stop early once ``page_size`` tasks matched, or once ``budget`` (a
    ``budget.Budget``: round trips, time, the client gone) is spent. The lists are looked at in
    order, the empty ones skipped ``PROBED`` at a time. Returns a ``SearchPage`` whose ``cursor``
    goes on where this one stopped ("search further"). ``ids_only``: its ``tasks`` are ids, and a
    search by queue and state (or one tag) alone reads no task."""
    s = parse_search(text_or_search) if isinstance(text_or_search, str) else text_or_search
    budget = budget or Budget(round_trips=10**12, seconds=float("inf"))
    blind = ids_only and (s.only_sets or _tag_only(s)) and "waiting" not in s.states
    queues = list(dict.fromkeys(s.queues)) if s.queues else known_queues(client)
    budget.spend(0 if s.queues else 1)
    sources = _sources(s, queues)
    index, offset = _parse_cursor(cursor, len(sources))
    found, scanned, sizes, stopped = [], 0, {}, None
    while index < len(sources) and len(found) < page_size:
        if scanned >= scan_limit:
            stopped = "scan limit"
            break
        stopped = budget.spent()
        if stopped:
            break
        if index not in sizes:
            sizes = _sizes(client, sources, index)
            budget.spend()
        if offset >= sizes[index]:  # empty (or read to its end): no need to read it
            index, offset = index + 1, 0
            continue
        queue, kind, key = sources[index]
        budget.spend(2 if kind == "lockwaits" else 1)
        ids, looked, done = _read_source(client, queue, kind, key, offset, min(500, scan_limit - scanned))
        if blind and kind != "lockwaits":  # every entry matches: no task to read
            ids = [_decode(i) for i in ids[: page_size - len(found)]]
            found += ids
            if len(ids) < looked:
                looked, done = len(ids), False
            scanned += looked
            offset += looked
            if done:
                index, offset = index + 1, 0
            continue
        p = client.pipeline(transaction=False)
        for tid in ids:
            p.hgetall(keys.task_key(queue, _decode(tid)))
        budget.spend(1 if ids else 0)
        for i, (tid, h) in enumerate(zip(ids, p.execute())):
            t = Task.from_hash(_decode(tid), queue, h)
            if t is not None and _matches(s, t, set(t.tags or ())):
                found.append(t.id if ids_only else t)
                if len(found) >= page_size and kind != "lockwaits" and i + 1 < len(ids):
                    looked, done = i + 1, False  # stop right after it: the cursor goes on from there
                    break
        scanned += looked
        offset += looked
        if done:
            index, offset = index + 1, 0
    total = None
    if not cursor and not budget.spent() and (_tag_only(s) or s.only_sets):
        total = search_total(client, s, queues)
        budget.spend(0 if total is None else 1 if _tag_only(s) else 2)
    next_cursor = f"{index}.{offset}" if index < len(sources) else None
    reached = len({q for q, _, _ in sources[: index + 1]}) if sources else 0
    return SearchPage(found, next_cursor, scanned, total, budget.used, stopped, min(reached, len(queues)), len(queues))


#: A search cursor: "<source>.<offset>", ASCII digits, the offset far below Redis's 64-bit
#: range arguments (a bigger one made LRANGE fail).
_CURSOR = re.compile(r"([0-9]{1,9})\.([0-9]{1,15})")


def _parse_cursor(cursor, n):
    if cursor in (None, ""):
        return 0, 0
    match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
    if match is None or int(match[1]) > n:
        raise SearchError(f"{str(cursor)[:40]!r} is not a search cursor")
    return int(match[1]), int(match[2])


# -- history -----------------------------------------------------------------------------------

#: The spans a history shows: (bucket minutes, buckets).
HISTORY_SPANS = {"1h": (1, 60), "24h": (15, 96), "7d": (60, 168)}
DEPTH_MINUTES, DEPTH_HOURS = 1440, 168


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
        f = _decode(f)
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
    """Record the depth of ``queue`` now (once a minute at most; a worker's heartbeat calls the
    asyncio twin of this)."""
    minute, hour, depth = depth_sample(queue_counts(client, queue), server_ms(client))
    p = client.pipeline(transaction=False)
    depth_writes(p, queue, minute, hour, depth)
    if p.execute()[-1] > DEPTH_MINUTES + DEPTH_HOURS + 8:
        sweep_depth(client, queue, minute, hour)


def history(client, queue, span="1h", now_ms=None):
    """Throughput, failures and depth of ``queue`` over ``span`` ("1h", "24h" or "7d"), oldest
    first: {span, bucket_minutes, start_ms, completed: [...], failed: [...], depth: [... or None]}.
    1 h and 24 h read the per-minute counters (24 h summed by quarter hours), 7 d the hourly
    ones; depth is the sample at each bucket's start (None where none was taken)."""
    if span not in HISTORY_SPANS:
        raise ValueError(f"span must be one of {', '.join(HISTORY_SPANS)}, not {span!r}")
    width, n = HISTORY_SPANS[span]
    now_ms = server_ms(client) if now_ms is None else now_ms
    tkey, dkey = keys.queue_key(queue, "throughput"), keys.queue_key(queue, "depth")
    if span == "7d":
        h_now = now_ms // 3600000
        hours = list(range(h_now - n + 1, h_now + 1))
        p = client.pipeline(transaction=False)
        p.hmget(tkey, [f"{k}{h}" for h in hours for k in ("C", "F")])
        p.hmget(dkey, [f"h{h}" for h in hours])
        counters, depth = p.execute()
        completed = [int(counters[2 * i] or 0) for i in range(n)]
        failed = [int(counters[2 * i + 1] or 0) for i in range(n)]
        start_ms = hours[0] * 3600000
    else:
        m_now = now_ms // 60000
        first = (m_now // width) * width - (n - 1) * width
        minutes = list(range(first, first + n * width))
        p = client.pipeline(transaction=False)
        p.hmget(tkey, [f"{k}{m}" for m in minutes for k in ("c", "f")])
        p.hmget(dkey, [f"m{m}" for m in minutes[::width]])
        counters, depth = p.execute()
        completed = [sum(int(counters[2 * j] or 0) for j in range(i * width, (i + 1) * width)) for i in range(n)]
        failed = [sum(int(counters[2 * j + 1] or 0) for j in range(i * width, (i + 1) * width)) for i in range(n)]
        start_ms = first * 60000
    return {
        "span": span,
        "bucket_minutes": width,
        "start_ms": start_ms,
        "completed": completed,
        "failed": failed,
        "depth": [None if d is None else int(d) for d in depth],
    }


def duration_percentiles(client, queue, quantiles=(0.5, 0.9, 0.99)):
    """Run-duration percentiles of ``queue`` (seconds), estimated from the histogram the scripts
    keep (linear within a bucket; the open last bucket gives its lower bound): {count, mean,
    p50, p90, p99}, or None before the first run."""
    found = durations(client, [queue]).get(queue)
    if not found:
        return None
    buckets, total_s = found
    count = buckets[-1][1]
    if not count:
        return None
    out = {"count": count, "mean": total_s / count}
    bounds = [0.0, *(_durations.BUCKETS)]
    for q in quantiles:
        rank, previous = q * count, 0
        for i, (_, cumulative) in enumerate(buckets):
            if cumulative >= rank:
                low = bounds[i] if i < len(bounds) else bounds[-1]
                if i >= len(_durations.BUCKETS):  # past the last bound: its lower bound
                    value = low
                else:
                    high = _durations.BUCKETS[i]
                    inside = cumulative - previous
                    value = low + (high - low) * ((rank - previous) / inside if inside else 1)
                out[f"p{round(q * 100):g}"] = value
                break
            previous = cumulative
    return out


def in_flight(client, queue, worker=None, limit=10000):
    """Ids of the tasks of ``queue`` in process: those ``worker`` holds, or (None) all the active
    ones, at most ``limit`` (the chaos soak's record of what a fault strands)."""
    if worker is not None:
        return [_decode(i) for i in client.srandmember(keys.worker_tasks_key(queue, worker), limit)]
    return [_decode(i) for i in client.zrange(keys.queue_key(queue, "active"), 0, limit - 1)]
