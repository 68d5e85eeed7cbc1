"""Reads of the record of ended tasks (``history``, ``lua/includes/history.lua``): one task's
record, a page of a queue's records by outcome, newest first, and their counts."""

import json
from dataclasses import dataclass

from .. import keys
from ..task import Task
from ._common import decode


@dataclass
class Ended:
    """An ended task's record: the task as it ended (``state``: completed, cancelled or failed),
    its payload's full size when only its head was kept, its last log lines and how many it
    had, and why it was cancelled (a parent's end), if it was."""

    task: Task
    payload_size: int | None
    log: list
    log_total: int
    reason: str
    #: For a schedule's run: its meta ({schedule, tick, kind}; ``schedule_runs``).
    run: dict | None = None


def _as_bytes(value):
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return str(value).encode()


def ended_from_record(task_id, queue, raw):
    """An Ended from a record's JSON (bytes), or None if there is none or it can't be read."""
    if raw is None:
        return None
    try:
        rec = json.loads(raw.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    log = rec.pop("log", None)
    log = [decode(_as_bytes(line)) for line in log] if isinstance(log, list) else []
    h = {k.encode(): _as_bytes(v) for k, v in rec.items() if not isinstance(v, (list, dict))}
    task = Task.from_hash(task_id, queue, h)
    if task is None:
        return None
    size = rec.get("ps")
    return Ended(
        task=task,
        payload_size=int(size) if size else None,
        log=log,
        log_total=int(rec.get("ln") or len(log)),
        reason=decode(h.get(b"why")) or "",
    )


def ended_task(client, task_id):
    """The record of task ``task_id`` once it ended (an Ended), or None (never ended, pruned,
    deleted, or no task id)."""
    queue = keys.queue_from_task_id(task_id)
    if queue is None:
        return None
    return ended_from_record(task_id, queue, client.hget(keys.queue_key(queue, "history"), task_id))


def ended_tasks(client, queue, outcome, offset=0, limit=50, newest_first=True):
    """One page of ``queue``'s ended tasks with ``outcome`` (completed, cancelled or failed), newest
    first: [Ended], in two round trips whatever the record's size."""
    index = keys.history_index(queue, outcome)
    fetch = client.zrevrange if newest_first else client.zrange
    ids = [decode(i) for i in fetch(index, offset, offset + max(1, limit) - 1)]
    if not ids:
        return []
    raws = client.hmget(keys.queue_key(queue, "history"), ids)
    return [e for e in (ended_from_record(i, queue, r) for i, r in zip(ids, raws)) if e is not None]


def ended_counts(client, queue):
    """{outcome: records kept} for ``queue``."""
    p = client.pipeline(transaction=False)
    for outcome in keys.HISTORY_OUTCOMES:
        p.zcard(keys.history_index(queue, outcome))
    return dict(zip(keys.HISTORY_OUTCOMES, p.execute()))


def again_of(client, task_id):
    """The id of the task that ``task_id`` was enqueued to run again ("Run again"), or None."""
    queue = keys.queue_from_task_id(task_id)
    if queue is None:
        return None
    return decode(client.hget(keys.queue_key(queue, "again"), task_id))


#: Records of ended tasks a schedule's page looks through (newest first) for its runs.
SCHEDULE_RUNS_SCAN = 2000


def schedule_runs(client, queue, name, limit=50, scan=SCHEDULE_RUNS_SCAN):
    """The last ``limit`` runs of schedule ``name`` that ended and whose record is kept, newest
    first: [Ended] whose task's meta names the schedule (``schedules.run_meta``). Looks through
    the newest ``scan`` records of each outcome of ``queue`` at most (a bounded read)."""
    p = client.pipeline(transaction=False)
    for outcome in keys.HISTORY_OUTCOMES:
        p.zrevrange(keys.history_index(queue, outcome), 0, scan - 1, withscores=True)
    newest = sorted((pair for reply in p.execute() for pair in reply), key=lambda pair: -pair[1])[:scan]
    out = []
    for start in range(0, len(newest), 500):
        ids = [decode(i) for i, _ in newest[start : start + 500]]
        raws = client.hmget(keys.queue_key(queue, "history"), ids)
        for task_id, raw in zip(ids, raws):
            e = ended_from_record(task_id, queue, raw)
            if e is None or not e.task.meta:
                continue
            try:
                meta = json.loads(e.task.meta)
            except ValueError:
                continue
            if isinstance(meta, dict) and meta.get("schedule") == name:
                e.run = meta
                out.append(e)
                if len(out) >= limit:
                    return out
    return out
