"""The overview (every queue), a queue's page, its failures page and its history page."""

from ... import outbox
from ...engine import readmodel
from ..bounds import ACTIVE_MAX, ACTIVE_SHOWN, FAILURES_PER_PAGE, PER_PAGE, failure_groups_shown, paged, preview
from ..failures import group_failures
from .common import failure_json, fmt, server_ms, task_row, throughput
from .worker_pages import workers

_COUNT_NAMES = ("pending", "delayed", "active", "failed", "completed", "waiting", "blocked", "failures", "enqueued")


#: Queues on a page of the overview.
QUEUES_PER_PAGE = 50
#: Up to this many queues, the overview's totals and chart are summed over every queue at each
#: refresh (two round trips, about 30 ms at 500); above, they are the sums the workers' sweep
#: made on its last pass over every queue (``readmodel.summary``, at most a few minutes old).
SUMMED_LIVE = 500


def _queue_row(name, counts):
    return {
        "name": name,
        "paused": counts["paused"],
        "served": counts["served"],
        **{k: counts[k] for k in _COUNT_NAMES},
    }


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


def _group_json(group):
    return {
        "key": group["key"],
        "type": group["type"],
        "shape": group["shape"],
        "count": group["count"],
        "first_seen": fmt(group["first_seen"]),
        "last_seen": fmt(group["last_seen"]),
        "example": preview(group["example"], 300),
        "failures": [failure_json(e) for e in group["failures"]],
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
        "counts": {
            "paused": counts["paused"],
            "served": counts["served"],
            **{k: counts[k] for k in _COUNT_NAMES},
            "expired": counts["expired"],
        },
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
        "expired": {
            "total": counts["expired"],
            "tasks": [_expired_row(e) for e in readmodel.expired(client, name, PER_PAGE)],
        },
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
    listed["rows"] = [failure_json(e) for e in listed["rows"]]
    return {"view": "failures", "queue": name, "now_ms": server_ms(client), "failures": listed}


def _blocked_row(client, task):
    """A blocked task's row, with how many of its parents it still waits for."""
    row = task_row(task)
    told = readmodel.parents(client, task.queue, task.id)
    row["waiting_for"] = sum(1 for v in told.values() if v == "w")
    row["parents"] = len(told)
    return row


def _iso(value):
    return value.isoformat(timespec="seconds") if value else None


def _expired_row(entry):
    """An expired task's row (``readmodel.expired``): its id, tags and times as ISO text."""
    return {
        "id": entry["id"],
        "tags": entry["tags"],
        **{k: _iso(entry[k]) for k in ("created_at", "expires_at", "expired_at")},
    }


def _rate_text(rate):
    """[starts, seconds] as the limits form writes it: "5,2"."""
    if rate is None:
        return ""
    starts, seconds = rate
    return f"{starts},{int(seconds) if float(seconds).is_integer() else seconds}"


def limits_view(limits):
    """The queue's limits as the queue page shows them: each limit with its use, and the form's values."""
    out = dict(limits)
    # a handler's RateLimited: nothing starts (in the queue, or in these partitions) until then
    out["held_until"] = _iso(limits["held_until"])
    out["held_partitions"] = {k: _iso(v) for k, v in limits["held_partitions"].items()}
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
        "deploys": readmodel.deploys(client, h["start_ms"], server_ms(client)),
        "totals": {"completed": sum(h["completed"]), "failed": sum(h["failed"])},
        "durations": None if p is None else {k: (round(v, 4) if isinstance(v, float) else v) for k, v in p.items()},
    }


def timings(client, name, span, counts=False, slot=None):
    """The charts of run and wait times over ``span`` (one point per bucket of the queue's
    history), with the deploys marked in that span; ``counts``: and the completed and failed
    attempts of the same buckets (``history``). ``slot``: one handler's (``readmodel.handler_slot``),
    its own counts of completed and failed attempts."""
    t = readmodel.timings(client, name, span, slot=slot)
    if slot is None:
        history = readmodel.history(client, name, span) if counts else None
    else:
        history = {k: t[k] for k in ("bucket_minutes", "start_ms", "completed", "failed")} if counts else None
    return {
        "timings": t,
        "deploys": readmodel.deploys(client, t["start_ms"], server_ms(client)),
        "history": history,
    }
