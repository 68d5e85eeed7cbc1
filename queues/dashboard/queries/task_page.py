"""A task's page: the task, its failure history entries, its log, its parents and children."""

import json
import re

from ...engine import keys, readmodel
from ...engine.crypto import Sealed
from ..bounds import TASK_FAILURES_SHOWN, TASK_TRACEBACK_SHOWN, TRACEBACK_MAX, log_shown, tail
from .common import failure_json, fmt, server_ms, task_row


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


#: A checkpoint is shown up to this many characters of its JSON.
CHECKPOINT_SHOWN = 2000


def _checkpoint_text(value):
    """A generator handler's checkpoint as the page shows it: its JSON, cut (or "" for none)."""
    if value is None:
        return ""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= CHECKPOINT_SHOWN else text[:CHECKPOINT_SHOWN] + "…"


def task_shown(client, task_id):
    """Whether the task page of ``task_id`` shows anything (``shows_task``): a live task is found
    with one read, without the page's reads of the failure history and the ended record."""
    return readmodel.task(client, task_id) is not None or shows_task(task(client, task_id))


def shows_task(snapshot):
    """Whether a task snapshot (``task``) shows anything: the task, its record once ended, its
    failure history entries or how it ended. The task page answers 404 and its live feed is
    closed with 4404 when it does not."""
    return snapshot["task"] is not None or bool(snapshot["failures"]["total"]) or bool(snapshot["ended"])


def task(client, task_id, full=False, payload_limit=4000):
    """The task page: the task (once ended, its record: ``record`` true; None once that is gone
    too) and its entries in the failure history."""
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
            "shown": [failure_json(e, TASK_TRACEBACK_SHOWN) for e in history[:TASK_FAILURES_SHOWN]],
        },
        "parents": [],
        "children": [],
    }
    out["parents"], out["children"] = relatives(client, queue_name, task_id)
    record = readmodel.ended_task(client, task_id) if found is None else None
    out["ended"] = None if found is not None else ended(client, queue_name, task_id)
    if record is not None:  # ended: its record stands for it
        found = record.task
    out["record"] = record is not None
    if out["ended"] and not out["parents"] and out["ended"]["parent"]:  # its parents went with it
        pid = out["ended"]["parent"]
        out["parents"] = [{"id": pid, "state": readmodel.task_ends(client, [pid])[pid] or "gone"}]
    if found is not None:
        d = found.as_dict()
        payload = d["payload"] or ""
        row = task_row(found)
        row["ended"] = record is not None
        row["again_of"] = readmodel.again_of(client, task_id) or ""
        row.update(
            payload=payload if full else payload[:payload_limit],
            payload_size=len(payload),
            truncated=not full and len(payload) > payload_limit,
            kept_head=record.payload_size if record is not None else None,
            retries=d["retries"],
            timeout=d["timeout"],
            error=d["error"] or "",
            traceback=tail(found.traceback, TRACEBACK_MAX),
            unique_key=found.unique_key or "",
            callback=found.callback or "",
            batch=found.batch_id or "",
            finished=fmt(found.finished_at),
            is_bytes=isinstance(found.payload, bytes) and not isinstance(found.payload, Sealed),
            sealed=isinstance(found.payload, Sealed),
            expires=fmt(found.expires_at),
            throttle_key=found.throttle_key or "",
            debounce_key=found.debounce_key or "",
            checkpoint=_checkpoint_text(found.checkpoint),
            checkpoint_saved=fmt(found.checkpoint_saved_at),
            runs=found.runs,
        )
        out["task"] = row
    if record is not None:
        out["log"] = log_shown(record.log)
        out["log"]["total"] = record.log_total
    else:
        out["log"] = log_shown(readmodel.task_log(client, task_id) if found is not None else [])
    return out
