"""Acting on a whole batch, a bounded step at a time (the dashboard's batch page): cancel its
unfinished tasks, retry its failed ones. Each call does at most ``limit`` tasks and says where to
go on, so no request runs unbounded however large the batch.

A task counts in its batch by its first end (``batches``): cancelled tasks count as cancelled;
a failed task retried does not change the batch's counts.
"""

from itertools import groupby

from . import commands, keys, readmodel, workflows
from .codes import Code

#: Task ids looked at per round trip.
STEP = 500


def cancel_unfinished(client, batch_id, limit=2000):
    """Cancel up to ``limit`` of the batch's unfinished tasks (pending, delayed, waiting,
    blocked, running: running ones are told to stop). Returns (cancelled, more left)."""
    touched = set()
    try:
        return _cancel(client, batch_id, limit, touched)
    finally:
        for queue in touched:  # the removed tasks' ends told to the batch (and their children)
            workflows.drain(client, queue)


def _cancel(client, batch_id, limit, touched):
    cancelled, cursor, seen = 0, 0, set()
    while True:
        cursor, ids = readmodel.batch_live(client, batch_id, cursor, STEP)
        for task_id in ids:
            if task_id in seen:
                continue
            if len(seen) >= limit:
                return cancelled, True
            seen.add(task_id)
            queue = keys.queue_from_task_id(task_id)
            if queue is None:
                continue
            code = commands.cancel(queue, task_id).run(client)  # ended meanwhile: refused, skipped
            if code in (Code.REMOVED, Code.STOPPING):
                cancelled += 1
            if code == Code.REMOVED:
                touched.add(queue)
        if cursor == 0:
            return cancelled, False


def retry_failed(client, batch_id, start=0, limit=5000):
    """Retry the batch's failed tasks among its ``limit`` tasks from ``start`` (in the order they
    were added). Returns (retried, where to go on from, or None when the batch was looked through)."""
    total = client.llen(keys.batch_key(batch_id, "tasks"))
    end = min(total, start + limit)
    retried, offset = 0, start
    while offset < end:
        ids = readmodel.batch_tasks(client, batch_id, offset, min(STEP, end - offset))
        if not ids:
            break
        offset += len(ids)
        states = readmodel.task_ends(client, ids)
        failed = sorted((keys.queue_from_task_id(i), i) for i in ids if states.get(i) == "failed")
        for queue, group in groupby(failed, key=lambda pair: pair[0]):
            codes = commands.retry(queue, [i for _, i in group]).run(client)
            retried += sum(1 for c in codes if c == Code.REQUEUED)
    return retried, (offset if offset < total else None)
