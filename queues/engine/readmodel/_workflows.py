"""Reads of workflows: a task's links (``after=`` children, its batch, its recorded end) and
parents, the ends of tasks of any queues, the outbox of ended tasks still to tell, and batches
(one batch, its tasks, the list of batches, those whose callbacks may be due)."""

from .. import keys
from ._common import decode
from ._tasks import state_of


def outbox(client, queue, limit=100, before_ms=None):
    """Ids of ended tasks of ``queue`` whose children or batch are still to be told, oldest
    first; only those that ended before ``before_ms`` if given (a sweep leaves the newest to the
    worker that ended them)."""
    top = "+inf" if before_ms is None else f"({int(before_ms)}"
    return [decode(i) for i in client.zrangebyscore(keys.queue_key(queue, "outbox"), "-inf", top, 0, limit)]


def links(client, queue, task_id):
    """A task's links: {outcome: its end or None, batch: id or None, why: reason or None,
    children: [ids]} (None if it has none)."""
    return links_many(client, queue, [task_id])[0]


#: The fields of ``links:<id>`` that are not children: outcome, batch, reason, the ending run's
#: traceparent, and an expired task's callback URL, trace context, expiry time, retries, backoff.
_LINK_FIELDS = frozenset(("=", "b", "why", "rt", "cb", "tc", "ex", "xr", "xb"))


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
        h = {decode(k): decode(v) for k, v in raw.items()}
        children = sorted(k for k in h if k not in _LINK_FIELDS)
        out.append({"outcome": h.get("="), "batch": h.get("b"), "why": h.get("why"), "children": children})
        if "rt" in h:  # the traceparent of the run span that ended it (tracing on)
            out[-1]["run"] = h["rt"]
        if "ex" in h:  # expired: its callback URL, trace context and expiry time (ms), to tell
            out[-1]["expired"] = {
                "callback": h.get("cb") or "",
                "trace": h.get("tc") or "",
                "expires": int(h["ex"]),
                "retries": int(h["xr"]) if h.get("xr") else None,
                "backoff": float(h["xb"]) if h.get("xb") else None,
            }
    return out


def children_of(client, ids):
    """{id: [child ids]} of tasks of any queues (their ``after=`` children), one round trip per
    queue they belong to."""
    by_queue = {}
    for tid in ids:
        by_queue.setdefault(keys.queue_from_task_id(tid), []).append(tid)
    out = {}
    for queue, members in by_queue.items():
        for tid, info in zip(members, links_many(client, queue, members), strict=True):
            out[tid] = info["children"] if info else []
    return out


def workflow(client, task_id, limit=200):
    """The workflow from ``task_id``: its parents still waited for (a blocked task's), itself and
    its descendants (``after=`` children, theirs...), breadth first, at most ``limit`` tasks and
    ``5 * limit`` edges:
    ({id: state or None}, [(parent, child)], how many children were found and left out: a lower
    bound, their own descendants are not looked for). One round trip per level and queue."""
    queue = keys.queue_from_task_id(task_id)
    order = list(parents(client, queue, task_id)) + [task_id]
    edges = [(p, task_id) for p in order[:-1]]
    seen, level, left = set(order), [task_id], set()
    while level and not left:
        following = []
        for tid, kids in children_of(client, level).items():
            for kid in kids:
                if len(edges) < 5 * limit:  # what a graph of `limit` tasks can draw
                    edges.append((tid, kid))
                if kid not in seen:
                    if len(seen) >= limit:
                        left.add(kid)
                        continue
                    seen.add(kid)
                    order.append(kid)
                    following.append(kid)
        level = following
    return task_ends(client, order), edges, len(left)


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
        tid: state_of(*replies[3 * i]) or decode(replies[3 * i + 1]) or _ended_outcome(replies[3 * i + 2])
        for i, tid in enumerate(ids)
    }


def _ended_outcome(score):
    """The outcome an ``ended`` score records (end time ms * 4 + its code), or None."""
    return None if score is None else keys.ENDED_OUTCOMES[int(score) % 4]


def parents(client, queue, task_id):
    """{parent id: 'w' (not told yet) or its outcome} of a blocked task (empty once released)."""
    raw = client.hgetall(keys.parents_key(queue, task_id))
    return {decode(k): decode(v) for k, v in raw.items()}


def batch_tasks(client, batch_id, offset=0, limit=50):
    """One page of a batch's task ids, in the order they were added."""
    return [decode(i) for i in client.lrange(keys.batch_key(batch_id, "tasks"), offset, offset + limit - 1)]


def batch_live(client, batch_id, cursor=0, count=500):
    """(next cursor, ids) of a batch's unfinished tasks, a page at a time (SSCAN)."""
    cursor, ids = client.sscan(keys.batch_key(batch_id, "live"), cursor, count=count)
    return int(cursor), [decode(i) for i in ids]


def batches(client, offset=0, limit=50):
    """One page of batch ids, newest first, and how many there are."""
    p = client.pipeline(transaction=False)
    p.zrevrange(keys.BATCHES, offset, offset + limit - 1)
    p.zcard(keys.BATCHES)
    ids, total = p.execute()
    return [decode(i) for i in ids], total


def batches_due(client, limit=20, before_ms=None):
    """Ids of batches whose callbacks may still be due (closed, not yet enqueued), oldest first."""
    top = "+inf" if before_ms is None else f"({int(before_ms)}"
    return [decode(i) for i in client.zrangebyscore(keys.BATCHES_DUE, "-inf", top, 0, limit)]
