"""Page snapshots: what each dashboard page shows, as JSON-friendly dicts, formatted from what
the engine's read model (``queues.engine.readmodel``, the only reader of Redis) returns.

The views render them into templates and the live feeds push them over the websocket, so a
page and its updates always show the same thing. Nothing here touches Django's UI.
Times are strings in UTC (``YYYY-MM-DD HH:MM:SS``) with epoch milliseconds beside them where
the browser needs to compute (elapsed times, due in).
"""

import re

from .. import outbox
from ..engine import keys, readmodel
from .bounds import (
    ACTIVE_MAX,
    ACTIVE_SHOWN,
    FAILURES_PER_PAGE,
    PER_PAGE,
    TASK_FAILURES_SHOWN,
    TASK_TRACEBACK_SHOWN,
    TRACEBACK_MAX,
    failure_groups_shown,
    log_shown,
    names_shown,
    page_count,
    paged,
    preview,
    tail,
)
from .failures import group_failures

THROUGHPUT_MINUTES = 60


def fmt(dt):
    return dt.strftime("%Y-%m-%d %H:%M:%S") if dt else ""


def epoch_ms(dt):
    return int(dt.timestamp() * 1000) if dt else None


def server_ms(client):
    return readmodel.server_ms(client)


def task_row(task):
    """One task as a table row."""
    return {
        "id": task.id,
        "queue": task.queue,
        "state": task.state,
        "payload": preview(task.payload),
        "attempt": task.attempt,
        "worker": task.worker or "",
        "lock": task.lock or "",
        "error": preview(task.error, 200),
        "created": fmt(task.created_at),
        "started": fmt(task.started_at),
        "started_ms": epoch_ms(task.started_at),
        "due": fmt(task.due_at),
        "due_ms": epoch_ms(task.due_at),
        "failed": fmt(task.failed_at),
        "cancelling": task.cancel_requested,
        "progress": task.progress_value,
        "progress_pct": None if task.progress_value is None else round(task.progress_value * 100, 1),
        "progress_message": preview(task.progress_message, 200),
        "tags": list(task.tags or []),
    }


def throughput(client, queues, minutes=THROUGHPUT_MINUTES, now_ms=None):
    """Completed and failed per minute over the last ``minutes``, summed over ``queues``."""
    return readmodel.throughput(client, queues, minutes=minutes, now_ms=now_ms)


def _worker_row(info):
    return {
        "name": info["name"],
        "host": info.get("host", ""),
        "pid": info.get("pid", ""),
        "queues": list(info.get("queues") or []),
        "concurrency": info.get("concurrency", ""),
        "heartbeat_age": round(float(info.get("heartbeat_age", 0)), 1),
        "active": 0,
        "beat_active": info.get("active", 0),
        "processed": info.get("processed", 0),
        "failed": info.get("failed", 0),
        "started": (info.get("started_at") or "")[:19].replace("T", " "),
        "rss_mb": info.get("rss_mb"),
        "cpu": info.get("cpu"),
    }


#: (worker, queue) pairs whose tasks in process are counted from Redis at most; beyond (workers
#: serving thousands of queues), the heartbeats' counts are taken (they lag a beat).
PAIRS_COUNTED = 2000


def _count_active(client, rows):
    """Set each row's tasks in process, counted from Redis now (the heartbeat's count lags)."""
    pairs = [(row, q) for row in rows for q in row["queues"] if _valid_queue(q)]
    if len(pairs) > PAIRS_COUNTED:
        for row in rows:
            row["active"] = row["beat_active"]
        return rows
    for (row, _), n in zip(pairs, readmodel.workers_active(client, [(row["name"], q) for row, q in pairs])):
        row["active"] += n
    return rows


def workers(client):
    """Live workers; tasks in process counted from Redis now (the heartbeat's count lags)."""
    return _count_active(client, [_worker_row(info) for info in readmodel.workers(client)])


def workers_page(client, page=1):
    """One page of the live workers (``paged``), each row's queues as ``names_shown`` gives them."""
    listed = paged([_worker_row(info) for info in readmodel.workers(client)], page)
    for row in _count_active(client, listed["rows"]):
        row["queues"] = names_shown(row["queues"])
    return listed


def workers_view(client, page=1):
    """The workers page: one page of the live workers and the workers gone lately."""
    return {
        "view": "workers",
        "now_ms": server_ms(client),
        "workers": workers_page(client, page),
        "gone": gone_workers(client),
    }


def gone_workers(client, limit=100):
    """The workers gone most recently (stopped, or reaped as dead), newest first."""
    out = []
    for g in readmodel.gone_workers(client, limit):
        out.append(
            {
                "name": g.get("name", ""),
                "how": g.get("how", ""),
                "at": fmt(g.get("at")),
                "at_ms": epoch_ms(g.get("at")),
                "host": g.get("host", ""),
                "queues": names_shown(q for q in g.get("queues") or [] if _valid_queue(q)),
                "processed": g.get("processed"),
                "failed": g.get("failed"),
            }
        )
    return out


def worker(client, name):
    """One worker's page: its heartbeat (None once gone), its tasks in process with their
    progress, and what the gone list says of it."""
    info = readmodel.worker(client, name)
    out = {"view": "worker", "name": name, "now_ms": server_ms(client), "worker": None, "tasks": [], "gone": None}
    if info is not None:
        row = _worker_row(info)
        queues = [q for q in row["queues"] if _valid_queue(q)]
        tasks = readmodel.worker_tasks(client, name, queues)
        row["active"] = len(tasks)
        row["queues"] = {"shown": queues[:PER_PAGE], "more": max(0, len(queues) - PER_PAGE)}
        out["worker"], out["tasks"] = row, [task_row(t) for t in tasks[:PER_PAGE]]
        out["tasks_total"] = len(tasks)
    else:
        out["gone"] = next((g for g in gone_workers(client) if g["name"] == name), None)
    return out


def _valid_queue(name):
    try:
        keys.check_queue_name(name)
        return True
    except ValueError:
        return False


_COUNT_NAMES = ("pending", "delayed", "active", "failed", "completed", "waiting", "blocked", "failures", "enqueued")


#: Queues on a page of the overview.
QUEUES_PER_PAGE = 50
#: Up to this many queues, the overview's totals and chart are summed over every queue at each
#: refresh (two round trips, about 30 ms at 500); above, they are the sums the workers' sweep
#: made on its last pass over every queue (``readmodel.summary``, at most a few minutes old).
SUMMED_LIVE = 500


def _queue_row(name, counts):
    return {"name": name, "paused": counts["paused"], **{k: counts[k] for k in _COUNT_NAMES}}


def totals_of(rows):
    """The counts of ``rows`` (queue rows, or counts) summed, with how many are paused."""
    totals = {k: sum(r[k] for r in rows) for k in _COUNT_NAMES}
    totals["paused"] = sum(bool(r["paused"]) for r in rows)
    return totals


def overview(client, page=1):
    """One page of the queues (by name) with their counts, the totals and throughput of every
    queue (summed now up to ``SUMMED_LIVE`` queues, else the sweep's), and the workers online.
    Costs a few round trips and O(page) reads, whatever the number of queues (but the names)."""
    now = server_ms(client)
    names = readmodel.known_queues(client)
    listed = paged(names, page, QUEUES_PER_PAGE)
    listed["rows"] = [_queue_row(n, c) for n, c in zip(listed["rows"], readmodel.counts_of(client, listed["rows"]))]
    if len(names) <= SUMMED_LIVE:
        every = listed["rows"] if listed["total"] == len(listed["rows"]) else readmodel.counts_of(client, names)
        totals = dict(totals_of(every), queues=len(names), summed_at=None)
        chart = throughput(client, names, now_ms=now)
    else:
        summary = readmodel.summary(client)
        totals = summary and dict(summary["totals"], queues=summary["queues"], summed_at=fmt(summary["at"]))
        chart = summary and summary["throughput"]
    ws = workers(client)
    return {
        "view": "overview",
        "now_ms": now,
        "queues": listed,
        "totals": totals,
        "throughput": chart,
        "outbox": outbox.summary(),  # tasks committed but not in Redis yet (queues.outbox)
        "workers": {
            "online": len(ws),
            "busy": sum(w["active"] for w in ws),
            "slots": sum(int(w["concurrency"] or 0) for w in ws),
        },
    }


def queue_exists(client, name):
    return readmodel.queue_exists(client, name)


class FailureCache:
    """Keeps the grouped failure history of one queue until the history changes.

    The history only grows at its head (LPUSH then LTRIM), so its length and newest entry
    tell whether it changed without reading the (up to 100, tracebacks included) entries.
    """

    def __init__(self):
        self.signature, self.groups = None, []

    def groups_for(self, client, queue):
        signature = readmodel.failures_signature(client, queue)
        if signature != self.signature:
            self.groups = [_group_json(g) for g in group_failures(readmodel.failures(client, queue))]
            self.signature = signature
        return self.groups


def _failure_json(entry, traceback_limit=TRACEBACK_MAX):
    return {
        "id": entry.get("id", ""),
        "error": entry.get("error") or "",
        "attempts": entry.get("attempts"),
        "worker": entry.get("worker") or "",
        "failed": fmt(entry.get("failed_at")),
        "payload": preview(entry.get("payload")),
        "traceback": tail(entry.get("traceback"), traceback_limit),
    }


def _group_json(group):
    return {
        "key": group["key"],
        "type": group["type"],
        "shape": group["shape"],
        "count": group["count"],
        "first_seen": fmt(group["first_seen"]),
        "last_seen": fmt(group["last_seen"]),
        "example": preview(group["example"], 300),
        "failures": [_failure_json(e) for e in group["failures"]],
    }


def queue(client, name, page=1, cache=None):
    """The queue page: counts, one page of pending, delayed, in process, failed, locks, grouped
    failure history and throughput. Reads one page of each list, never a whole list."""
    read = readmodel.queue_page(client, name, page, PER_PAGE, active_limit=ACTIVE_MAX)
    counts, now = read["counts"], read["now_ms"]
    return {
        "view": "queue",
        "queue": name,
        "now_ms": now,
        "counts": {"paused": counts["paused"], **{k: counts[k] for k in _COUNT_NAMES}},
        "pending": {
            "page": read["page"],
            "pages": read["pages"],
            "offset": read["offset"],
            "total": counts["runnable"],  # the pending tasks that are not waiting for a lock
            "tasks": [task_row(t) for t in read["pending"]],
        },
        "delayed": {"total": counts["delayed"], "tasks": [task_row(t) for t in read["delayed"]]},
        "blocked": {"total": counts["blocked"], "tasks": [_blocked_row(client, t) for t in read["blocked"]]},
        "active": {"total": counts["active"], "tasks": [task_row(t) for t in read["active"][:ACTIVE_SHOWN]]},
        "failed": {"total": counts["failed"], "tasks": [task_row(t) for t in read["failed"]]},
        "locks": read["locks"],
        "limits": limits_view(readmodel.limits(client, name)),
        "failure_groups": failure_groups_shown((cache or FailureCache()).groups_for(client, name)),
        "throughput": throughput(client, [name], now_ms=now),
    }


def failures(client, name, page=1, task_id=None, shape=None):
    """The failures page (not live): the failure history of a queue, newest first, page by page
    (``paged``), each entry with its error and traceback (its last ``TRACEBACK_MAX``
    characters); only those of one task (``task_id``), or of one group (``shape``: its key)."""
    entries = readmodel.failures(client, name)
    if task_id:
        entries = [e for e in entries if e.get("id") == task_id]
    if shape:
        entries = next((g["failures"] for g in group_failures(entries, items=None) if g["key"] == shape), [])
    listed = paged(entries, page, FAILURES_PER_PAGE)
    listed["rows"] = [_failure_json(e) for e in listed["rows"]]
    return {"view": "failures", "queue": name, "now_ms": server_ms(client), "failures": listed}


def _blocked_row(client, task):
    """A blocked task's row, with how many of its parents it still waits for."""
    row = task_row(task)
    told = readmodel.parents(client, task.queue, task.id)
    row["waiting_for"] = sum(1 for v in told.values() if v == "w")
    row["parents"] = len(told)
    return row


def relatives(client, queue, task_id):
    """(parents, children) of a task, each [{id, state}] with the state now (or how it ended,
    or None once gone), at most 50 of each."""
    parents = sorted(readmodel.parents(client, queue, task_id))[:50]
    info = readmodel.links(client, queue, task_id)
    children = (info["children"] if info else [])[:50]
    states = readmodel.task_ends(client, [*parents, *children])
    return (
        [{"id": i, "state": states.get(i) or "gone"} for i in parents],
        [{"id": i, "state": states.get(i) or "gone"} for i in children],
    )


_REASON_RE = re.compile(r"parent (\S+) (completed|failed|cancelled|deleted)")


def ended(client, queue, task_id):
    """How a task that is gone ended, if its links recorded it (a task that had children or a
    batch, or one cancelled because of a parent; kept a day): {outcome, reason, parent (the
    parent named in the reason, or None)}, else None."""
    info = readmodel.links(client, queue, task_id) if queue else None
    if not info or not info["outcome"]:
        return None
    reason = info["why"] or ""
    m = _REASON_RE.fullmatch(reason)
    return {"outcome": info["outcome"], "reason": reason, "parent": m.group(1) if m else None}


def batch_row(info):
    """A batch as a row: its counts, and the shares of a progress bar (in %)."""
    total = info["total"] or 0
    done = info["completed"] + info["failed"] + info["cancelled"]

    def pct(n):
        return round(100 * n / total, 1) if total else 0

    return {
        **{k: info[k] for k in ("id", "description", "state", "total", "pending", "active")},
        **{k: info[k] for k in ("completed", "failed", "cancelled", "closed")},
        "done": done,
        "created": fmt(info["created_at"]),
        "finished": fmt(info["finished_at"]),
        "pct_completed": pct(info["completed"]),
        "pct_failed": pct(info["failed"] + info["cancelled"]),
        "pct_active": pct(info["active"]),
        # where the failed and the active parts of the bar start (an SVG bar: no inline style)
        "x_failed": pct(info["completed"]),
        "x_active": pct(info["completed"] + info["failed"] + info["cancelled"]),
        "pct_done": pct(done) if total else (100 if info["finished_at"] else 0),
        "queues": info["queues"],
        "on_success": info["on_success"],
        "on_complete": info["on_complete"],
        "callbacks_enqueued": info["callbacks_enqueued"],
    }


def batches(client, page=1):
    """The Batches page: one page of batches, newest first, with their progress."""
    ids, total = readmodel.batches(client, 0, 0)
    pages = page_count(total)
    page = min(max(1, page), pages)
    ids, total = readmodel.batches(client, (page - 1) * PER_PAGE, PER_PAGE)
    rows = [batch_row(info) for info in (readmodel.batch(client, i) for i in ids) if info]
    return {
        "view": "batches",
        "now_ms": server_ms(client),
        "batches": {"page": page, "pages": pages, "total": total, "rows": rows},
    }


def batch(client, batch_id, page=1):
    """A batch's page: its progress and one page of its tasks with their states."""
    info = readmodel.batch(client, batch_id)
    out = {"view": "batch", "id": batch_id, "now_ms": server_ms(client), "batch": None, "tasks": None}
    if info is None:
        return out
    pages = page_count(info["total"])
    page = min(max(1, page), pages)
    ids = readmodel.batch_tasks(client, batch_id, (page - 1) * PER_PAGE, PER_PAGE)
    states = readmodel.task_ends(client, ids)
    out["batch"] = batch_row(info)
    out["tasks"] = {
        "page": page,
        "pages": pages,
        "rows": [{"id": i, "queue": keys.queue_from_task_id(i), "state": states.get(i) or "gone"} for i in ids],
    }
    return out


def _rate_text(rate):
    """[starts, seconds] as the limits form writes it: "5,2"."""
    if rate is None:
        return ""
    starts, seconds = rate
    return f"{starts},{int(seconds) if float(seconds).is_integer() else seconds}"


def limits_view(limits):
    """The queue's limits as the queue page shows them: each limit with its use, and the form's values."""
    out = dict(limits)
    out["limited"] = any(
        limits[k] is not None for k in ("concurrency", "rate", "partition_concurrency", "partition_rate")
    )
    out["form"] = {
        "concurrency": limits["concurrency"] or "",
        "rate": _rate_text(limits["rate"]),
        "partition_concurrency": limits["partition_concurrency"] or "",
        "partition_rate": _rate_text(limits["partition_rate"]),
    }
    return out


def task(client, task_id, full=False, payload_limit=4000):
    """The task page: the task (None once finished) and its entries in the failure history."""
    found = readmodel.task(client, task_id)
    queue_name = keys.queue_from_task_id(task_id)
    history = [e for e in readmodel.failures(client, queue_name) if e.get("id") == task_id]
    out = {
        "view": "task",
        "id": task_id,
        "queue": queue_name,
        "now_ms": server_ms(client),
        "task": None,
        "failures": {
            "total": len(history),
            "shown": [_failure_json(e, TASK_TRACEBACK_SHOWN) for e in history[:TASK_FAILURES_SHOWN]],
        },
        "parents": [],
        "children": [],
    }
    out["parents"], out["children"] = relatives(client, queue_name, task_id)
    out["ended"] = None if found is not None else ended(client, queue_name, task_id)
    if out["ended"] and not out["parents"] and out["ended"]["parent"]:  # its parents went with it
        pid = out["ended"]["parent"]
        out["parents"] = [{"id": pid, "state": readmodel.task_ends(client, [pid])[pid] or "gone"}]
    if found is not None:
        d = found.as_dict()
        payload = d["payload"] or ""
        row = task_row(found)
        row.update(
            payload=payload if full else payload[:payload_limit],
            payload_size=len(payload),
            truncated=not full and len(payload) > payload_limit,
            retries=d["retries"],
            timeout=d["timeout"],
            error=d["error"] or "",
            traceback=tail(found.traceback, TRACEBACK_MAX),
            unique_key=found.unique_key or "",
            callback=found.callback or "",
            batch=found.batch_id or "",
            finished=fmt(found.finished_at),
            is_bytes=isinstance(found.payload, bytes),
        )
        out["task"] = row
    out["log"] = log_shown(readmodel.task_log(client, task_id) if found is not None else [])
    return out


def history(client, name, span):
    """The history page: throughput, failures and depth over ``span``, and the percentiles of
    run durations (seconds) from the engine's histogram."""
    h = readmodel.history(client, name, span)
    p = readmodel.duration_percentiles(client, name)
    return {
        "view": "history",
        "queue": name,
        "now_ms": server_ms(client),
        "history": h,
        "totals": {"completed": sum(h["completed"]), "failed": sum(h["failed"])},
        "durations": None if p is None else {k: (round(v, 4) if isinstance(v, float) else v) for k, v in p.items()},
    }
