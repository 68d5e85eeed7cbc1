"""The workers page and one worker's page."""

from ...engine import readmodel
from ..bounds import PER_PAGE, names_shown, paged
from .common import epoch_ms, fmt, server_ms, task_row, valid_queue


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
        "quiet": bool(info.get("quiet")),
    }


#: (worker, queue) pairs whose tasks in process are counted from Redis at most; beyond (workers
#: serving thousands of queues), the heartbeats' counts are taken (they lag a beat).
PAIRS_COUNTED = 2000


def _count_active(client, rows):
    """Set each row's tasks in process, counted from Redis now (the heartbeat's count lags)."""
    pairs = [(row, q) for row in rows for q in row["queues"] if valid_queue(q)]
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
                "queues": names_shown(q for q in g.get("queues") or [] if valid_queue(q)),
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
        queues = [q for q in row["queues"] if valid_queue(q)]
        tasks = readmodel.worker_tasks(client, name, queues)
        row["active"] = len(tasks)
        row["queues"] = {"shown": queues[:PER_PAGE], "more": max(0, len(queues) - PER_PAGE)}
        out["worker"], out["tasks"] = row, [task_row(t) for t in tasks[:PER_PAGE]]
        out["tasks_total"] = len(tasks)
    else:
        out["gone"] = next((g for g in gone_workers(client) if g["name"] == name), None)
    return out
