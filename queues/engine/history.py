"""The record of ended tasks and its pruning.

Every script that ends a task keeps a record of it (``lua/includes/history.lua``: the queue's
``history`` hash and one index per outcome, ``keys.py``): its fields, its payload up to
``keys.HISTORY_PAYLOAD_MAX`` bytes and its last ``keys.HISTORY_LOG_LINES`` log lines. The
workers prune it (``worker.duties.history``, a periodic duty) by ``WORQR["RETENTION"]``
(``retention.py``): records past their outcome's retention go, then the oldest beyond
``max_per_queue``, at most ``PRUNE_STEP`` per script call, so no call holds Redis up for long
whatever the record's size.
"""

from . import commands, keys, readmodel
from .queue import Queue

#: Records removed at most per call of the pruning script.
PRUNE_STEP = 500
#: Calls at most per queue per prune (a backlog is worked off over several beats).
PRUNE_CALLS_MAX = 20
#: Seconds between two prunes of a worker's queues.
PRUNE_EVERY = 10.0


def prune_call(queue, retention, now_ms, step=PRUNE_STEP):
    """One call of ``prune_history`` for ``queue`` at ``now_ms``."""
    own = retention.for_queue(queue)
    cutoffs = [now_ms - getattr(own, o) * 1000 for o in keys.HISTORY_OUTCOMES]
    return commands.prune_history(queue, cutoffs, own.max_per_queue, step)


def prune(client, queue, retention, now_ms=None, step=PRUNE_STEP, calls_max=PRUNE_CALLS_MAX):
    """Prune ``queue``'s record of ended tasks: up to ``calls_max`` calls of at most ``step``
    records each. Returns (records removed, whether more are still due)."""
    if now_ms is None:
        seconds, micros = client.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
    removed, more = 0, True
    for _ in range(calls_max):
        n, more = prune_call(queue, retention, now_ms, step).run(client)
        removed += n
        if not more:
            break
    return removed, bool(more)


#: Tasks "Run again" enqueues at most per call.
RUN_AGAIN_MAX = 500
#: What ``run_again`` answers for a task it did not run again.
NOT_RUN_AGAIN = ("unknown", "running", "cut")


def again_options(task):
    """The options of ``Queue.enqueue`` that make a new task like ``task`` (as it was enqueued:
    retries, timeout, backoff, lock, unique key, callback, meta, tags)."""
    options = {}
    for name in ("retries", "timeout", "backoff", "lock", "callback", "meta"):
        value = getattr(task, name)
        if value is not None:
            options[name] = value
    if task.unique_key:
        options["unique"] = task.unique_key
    if task.tags:
        options["tags"] = list(task.tags)
    return options


def run_again(client, task_ids, queue_of=keys.queue_from_task_id):
    """Enqueue, for each of ``task_ids`` that ended (its record kept) or failed for good, a new
    task with the same payload and options, noted as a run again of it. Returns {old id: new id,
    or a reason it was not run again: "unknown" (no such task or its record is gone), "running"
    (it has not ended), "cut" (its payload was kept only in part)}."""
    task_ids = list(task_ids)
    if len(task_ids) > RUN_AGAIN_MAX:
        raise ValueError(f"at most {RUN_AGAIN_MAX} tasks are run again per call")
    out, made = {}, {}
    for old in task_ids:
        queue = queue_of(old)
        if queue is None:
            out[old] = "unknown"
            continue
        record = readmodel.ended_task(client, old)
        task = record.task if record is not None else readmodel.task(client, old)
        if task is None:
            out[old] = "unknown"
        elif record is None and task.state != "failed":
            out[old] = "running"
        elif record is not None and record.payload_size:
            out[old] = "cut"
        else:
            new = Queue(queue).enqueue(task.payload, **again_options(task))
            out[old] = new
            made.setdefault(queue, []).append((new, old))
    for queue, pairs in made.items():
        commands.note_again(queue, pairs).run(client)
    return out
