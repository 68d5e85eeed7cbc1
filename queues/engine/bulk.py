"""Bulk actions: cancel, retry, delete or run again many tasks (chosen ids, or every task a search finds),
in batches, each batch one script call per queue, reporting progress as it goes.

1. Find: the ids are collected first (a search is read page by page, each read bounded by the
   scan limit), so acting on tasks never shifts the lists still to be read.
2. Act: ``BATCH`` ids per script call (``retry`` and ``delete`` take many ids; a cancel is one
   call per task, pipelined), so Redis is never held for long and other clients go on. After
   each batch cancelled or deleted, the queue's workflow outbox is drained (``workflows``): the
   children and batches of those tasks are told at once, not by a worker's sweep.

``progress(phase, done, total, changed)`` is called after each step; the caller keeps it where
the dashboard shows it (``keys.bulk_job_key``). ``check()`` is called before each step (each
page read, each batch): what it raises stops the action there, between two batches (the
dashboard stops a job so when it is asked to, or when its owner lost a right it needs).
A delete with ``finished_only`` deletes failed and completed tasks only: removing one that has
not run is a cancel, a right of its own.
"""

from collections import defaultdict

from . import commands, history, keys, readmodel, workflows
from .codes import Code

#: The actions and the code that counts a task as changed.
ACTIONS = {"cancel": (Code.REMOVED, Code.STOPPING), "retry": (Code.REQUEUED,), "delete": (Code.DELETED,), "again": ()}
BATCH = 500


def find_ids(client, search, scan_limit=10000, progress=None, check=None):
    """Every id ``search`` (a text or ``readmodel.Search``) finds, read ``scan_limit`` entries at
    a time."""
    found, cursor, scanned = [], None, 0
    while True:
        if check is not None:
            check()
        page = readmodel.search(client, search, cursor=cursor, scan_limit=scan_limit, page_size=10**9, ids_only=True)
        found += page.tasks
        scanned += page.scanned
        if progress is not None:
            progress("finding", len(found), None, 0)
        if not page.cursor:
            return list(dict.fromkeys(found))
        cursor = page.cursor


def apply(client, action, ids, progress=None, check=None, finished_only=False):
    """Do ``action`` ("cancel", "retry", "delete" or "again": run again) to ``ids``; returns how many changed (tasks
    no longer there, or in a state the action does not apply to, are skipped)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown bulk action {action!r}")
    ok = ACTIONS[action]
    by_queue = defaultdict(list)
    for task_id in ids:
        queue = keys.queue_from_task_id(task_id)
        if queue is not None:
            by_queue[queue].append(task_id)
    total, done, changed = len(ids), 0, 0
    for queue, queue_ids in by_queue.items():
        for start in range(0, len(queue_ids), BATCH):
            if check is not None:
                check()
            batch = queue_ids[start : start + BATCH]
            if action == "again":  # a new task like each that ended ("Run again": history.run_again)
                made = history.run_again(client, batch).values()
                changed += sum(1 for new in made if new not in history.NOT_RUN_AGAIN)
                done += len(batch)
                if progress is not None:
                    progress("acting", done, total, changed)
                continue
            if action == "cancel":
                codes = commands.run_pipelined(client, [commands.cancel(queue, i) for i in batch])
            elif action == "delete":
                codes = commands.delete(queue, batch, finished_only).run(client)
            else:
                codes = commands.retry(queue, batch).run(client)
            changed += sum(1 for c in codes if c in ok)
            if action != "retry":  # tasks that ended: tell their children and batches now, not by the sweep
                workflows.drain_all(client, queue)
            done += len(batch)
            if progress is not None:
                progress("acting", done, total, changed)
    return changed
