"""The Batches page and one batch's page."""

from ...engine import keys, readmodel
from ..bounds import PER_PAGE, page_count, preview
from .common import fmt, server_ms


def batch_row(info):
    """A batch as a row: its counts, and the shares of a progress bar (in %)."""
    total = info["total"] or 0
    done = info["completed"] + info["failed"] + info["cancelled"]

    def pct(n):
        return round(100 * n / total, 1) if total else 0

    counts = ((info["pending"], "pending"), (info["active"], "running"), (info["completed"], "completed"))
    counts += ((info["failed"], "failed"), (info["cancelled"], "cancelled"))
    return {
        **{k: info[k] for k in ("id", "description", "state", "total", "pending", "active")},
        # in words: "succeeded", "finished with failures"; "3 completed, 1 failed"
        "state_words": str(info["state"] or "").replace("_", " "),
        "summary": ", ".join(f"{n} {word}" for n, word in counts if n) or "no task yet",
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
        # [queue, payload preview] (a callback's payload may be as large as a task's)
        **{k: info[k] and [info[k][0], preview(info[k][1])] for k in ("on_success", "on_complete")},
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


#: The states a batch page filters by (a task's state, or its recorded end).
BATCH_STATES = ("pending", "delayed", "waiting", "blocked", "active", "completed", "failed", "cancelled", "gone")
#: Tasks a filtered page looks at, at most, to find its rows.
FILTER_SCAN_MAX = 5000


def batch_filtered(client, batch_id, state, start=0):
    """One page of the batch's tasks in ``state``, looking at its tasks from ``start`` on (at
    most ``FILTER_SCAN_MAX`` of them): rows, where the next page starts (None: the end), and how
    many were looked at."""
    rows, offset, looked = [], start, 0
    while len(rows) < PER_PAGE and looked < FILTER_SCAN_MAX:
        ids = readmodel.batch_tasks(client, batch_id, offset, 500)
        if not ids:
            return {"rows": rows, "next": None, "looked": looked, "state": state, "start": start}
        states = readmodel.task_ends(client, ids)
        for i in ids:
            offset += 1
            looked += 1
            if (states.get(i) or "gone") == state:
                rows.append({"id": i, "queue": keys.queue_from_task_id(i), "state": state})
                if len(rows) == PER_PAGE:
                    break
    more = readmodel.batch_tasks(client, batch_id, offset, 1)
    return {"rows": rows, "next": offset if more else None, "looked": looked, "state": state, "start": start}


#: The most tasks a batch's or a workflow's graph draws (the rest: "N more").
GRAPH_NODES = 200


def batch_graph(client, batch_id):
    """A batch's graph: its first GRAPH_NODES tasks, then the tasks enqueued ``after=`` them
    (outside the batch: a batch's own tasks wait for none) while there is room, with their
    states and the edges between them, and how many more there are: {nodes: [(id, state)],
    edges, more}."""
    info = readmodel.batch(client, batch_id)
    if info is None:
        return None
    ids = readmodel.batch_tasks(client, batch_id, 0, GRAPH_NODES)
    edges = [(tid, kid) for tid, kids in readmodel.children_of(client, ids).items() for kid in kids][: 5 * GRAPH_NODES]
    shown, more = set(ids), max(0, (info["total"] or 0) - len(ids))
    for _, kid in edges:
        if kid not in shown:
            shown.add(kid)
            if len(ids) < GRAPH_NODES:
                ids.append(kid)
            else:
                more += 1
    states = readmodel.task_ends(client, ids)
    return {"nodes": [(i, states.get(i) or "gone") for i in ids], "edges": edges, "more": more}


def workflow_graph(client, task_id):
    """A workflow's graph from ``task_id`` (its waited-for parents, itself and its descendants):
    {nodes: [(id, state)], edges, more (children found and left out: at least that many)}."""
    states, edges, more = readmodel.workflow(client, task_id, GRAPH_NODES)
    return {"nodes": [(i, s or "gone") for i, s in states.items()], "edges": edges, "more": more}


def batch_exists(client, batch_id):
    """Whether a batch's page shows it (its ``batch`` is not None): else it answers 404."""
    return readmodel.batch(client, batch_id) is not None


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
