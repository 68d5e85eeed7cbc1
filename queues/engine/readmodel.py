"""The read model: every read of Redis that dashboards, commands, metrics and the HTTP API
show, and the only place besides the scripts that knows the keys' layout and the task hash's
field names. Reads only, never scans: every list is read a page at a time and every count is a
length or a counter kept by Redis. Counts are read in one MULTI, so they are consistent.
"""

import json

from . import durations as _durations
from . import keys, scripts
from .task import Task, ms_to_datetime

_STAT_NAMES = (
    "enqueued",
    "completed",
    "failed",
    "failures",
    "retried",
    "cancelled",
    "deleted",
    "waiting",
    "gone",
    "plisted",
)


def _decode(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def known_queues(client):
    """Names of queues that have had tasks or workers, sorted."""
    return sorted(_decode(q) for q in client.smembers(keys.KNOWN_QUEUES))


def _counts(reply):
    front, listed, delayed, active, failed, flat, paused = reply
    stats = dict(zip(flat[::2], flat[1::2]))
    counts = {name: int(stats.get(name.encode(), 0)) for name in _STAT_NAMES}
    gone = counts.pop("gone")
    partitioned = counts.pop("plisted")  # runnable tasks listed in their partitions
    counts["total_failed"] = counts.pop("failed")
    runnable = front + listed + partitioned - gone  # entries of removed tasks are skipped when reached
    counts.update(
        pending=runnable + counts["waiting"], runnable=runnable, delayed=delayed, active=active, failed=failed
    )
    counts["paused"] = bool(paused)
    return counts


def queue_counts(client, queue):
    """Counts per state and lifetime counters of one queue, read atomically (one script).

    ``pending`` includes tasks waiting for a lock (also given alone as ``waiting``; the others
    are ``runnable``); ``failed`` is the size of the failed set (tasks out of attempts);
    ``total_failed`` counts tasks that ran out of attempts, ``failures`` failed attempts.
    """
    return _counts(scripts.run(client, "counts", queue))


def overview(client):
    """[{name, counts...}] for every known queue, in two round trips whatever their number
    (each queue's counts read atomically)."""
    names = known_queues(client)
    replies = scripts.run_pipelined(client, [("counts", name, ()) for name in names])
    return [dict(_counts(reply), name=name) for name, reply in zip(names, replies)]


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
    if gone:
        client.srem(keys.WORKER_REGISTRY, *gone)
    return out


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
        p.hget(keys.task_key(keys.queue_from_task_id(task_id), task_id), "s")
    return {task_id: _decode(state) for task_id, state in zip(ids, p.execute() if ids else [])}


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


def limits(client, queue, busiest=10):
    """The queue's limits and their use: the limits in force (``concurrency``, ``rate`` as
    [starts, seconds], ``partition_concurrency``, ``partition_rate``; None: no limit), where they
    come from (``handler``, ``overrides``), ``active`` tasks, ``starts_in_window`` (None without
    a rate), ``held_back`` (runnable tasks the queue's own limits hold back now), and
    ``partitions``: listed (with tasks runnable), in the ring, held back, and the busiest."""
    lk = keys.queue_key(queue, "limits")
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
    rate = in_force["rate"]
    window = int(h.get("rw") or 0)
    p.zcount(keys.queue_key(queue, "starts"), f"({now - window}", "+inf")
    p.hlen(keys.queue_key(queue, "partitions"))
    p.llen(keys.queue_key(queue, "ring"))
    p.zcard(keys.queue_key(queue, "pwait"))
    p.zrevrange(keys.queue_key(queue, "pactive"), 0, max(busiest, 1) - 1, withscores=True)
    active, starts, listed, ring, rate_waiting, top = p.execute()
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
        starts_in_window=starts if rate is not None else None,
        held_back=held_back,
        runnable=counts["runnable"],
        partitions={
            "listed": listed,
            "in_ring": ring,
            "held_back": max(0, listed - ring),
            "rate_waiting": rate_waiting,
            "busiest": [{"key": _decode(k), "active": int(n)} for k, n in top][:busiest],
        },
    )
