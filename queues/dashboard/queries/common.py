"""What every page's snapshot shares: times as text and epoch milliseconds, a task as a table
row, throughput, and a failure history entry."""

from ...engine import keys, readmodel
from ..bounds import TRACEBACK_MAX, preview, tail

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
    """Completed and failed per minute over the last ``minutes``, summed over ``queues``, with
    the deploys marked in that time (``deploys``: the chart draws them)."""
    out = readmodel.throughput(client, queues, minutes=minutes, now_ms=now_ms)
    out["deploys"] = readmodel.deploys(client, out["start_ms"], out["start_ms"] + minutes * 60000)
    return out


def valid_queue(name):
    try:
        keys.check_queue_name(name)
        return True
    except ValueError:
        return False


def failure_json(entry, traceback_limit=TRACEBACK_MAX):
    return {
        "id": entry.get("id", ""),
        "error": entry.get("error") or "",
        "attempts": entry.get("attempts"),
        "worker": entry.get("worker") or "",
        "failed": fmt(entry.get("failed_at")),
        "payload": preview(entry.get("payload")),
        "traceback": tail(entry.get("traceback"), traceback_limit),
    }
