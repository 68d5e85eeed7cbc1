"""Step 1 of workflows (``after=``): checking a task's parents and linking it to them in their
queues, before the task is enqueued (``enqueueing``); the steps after a task ends are
``workflows``'."""

import json
from collections import defaultdict

from . import commands, keys, readmodel
from .codes import Code
from .errors import InvalidInput, TaskNotFound

#: At most this many parents per task.
MAX_PARENTS = 1000

ON_PARENT_FAILURE = ("cancel", "run")


def check_after(after, on_parent_failure, ids):
    """Check ``after`` and ``on_parent_failure``: the parent ids, deduplicated in order (or [])."""
    if on_parent_failure not in ON_PARENT_FAILURE:
        raise InvalidInput(f"on_parent_failure must be 'cancel' or 'run', not {on_parent_failure!r}")
    if after is None:
        return []
    if isinstance(after, (str, bytes)) or not isinstance(after, (list, tuple, set, frozenset)):
        raise InvalidInput(f"after must be a list of task ids, not {type(after).__name__}")
    parents = list(dict.fromkeys(after))
    if len(parents) > MAX_PARENTS:
        raise InvalidInput(f"after has {len(parents)} parents; at most {MAX_PARENTS} are allowed")
    for p in parents:
        if keys.queue_from_task_id(p) is None:
            raise InvalidInput(f"after: {p!r} is not a task id")
    if ids and set(ids) & set(parents):
        raise InvalidInput("after: a task can't wait for itself (a cycle)")
    return parents


def check_parents_exist(client, parents):
    """Raise TaskNotFound naming the first parent that is neither in Redis nor recorded as ended."""
    states = readmodel.task_ends(client, parents)
    for p in parents:
        if states[p] is None:
            raise TaskNotFound(
                f"after: no such task {p} (it never existed, or it ended too long ago: a queue remembers how its "
                f"last {keys.ENDED_MAX:,} tasks ended, for {keys.ENDED_KEEP_MS // 3_600_000} h at most)"
            )
    return states


def link(client, parents, children, on_parent_failure):
    """Step 1 of enqueueing ``children`` after ``parents``: check every parent, then link them in
    each parent's queue. Returns the ``parents`` argument of ``commands.enqueue``."""
    check_parents_exist(client, parents)  # nothing written if one is unknown
    by_queue = defaultdict(list)
    for p in parents:
        by_queue[keys.queue_from_task_id(p)].append(p)
    told = {}
    for queue, pids in by_queue.items():
        code, answer = commands.link(queue, pids, children).run(client)
        if code == Code.UNKNOWN:  # it ended (leaving nothing) since the check: a rare race
            raise TaskNotFound(f"after: no such task {pids[answer]} (it ended meanwhile)")
        told.update(zip(pids, answer))
    doc = {"p": [[p, told[p]] for p in parents]}
    if on_parent_failure == "run":
        doc["ob"] = "run"
    return json.dumps(doc, separators=(",", ":"))
