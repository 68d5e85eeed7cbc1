"""Workflows: tasks that wait for other tasks (``after=``), chains, and the cross-slot step that
tells children (and batches) that a task ended.

A task enqueued with ``after=[ids]`` is ``blocked`` until each parent has completed. Parents may
be in other queues; each queue is its own cluster slot and one script touches one slot, so:

1. enqueue (``linking``): ``link`` runs in each parent's queue (the parent records the new ids in
   ``links:<parent>``, or answers its outcome if it already ended), then ``enqueue`` writes the
   children as ``blocked`` in theirs (with ``parents:<child>``);
2. a task ends (completed, failed for good, cancelled, deleted, expired): the script that ended
   it records the outcome in ``links:<id>`` and puts the id in its queue's ``outbox`` (O(1));
3. ``drain``: for each id in the outbox, ``resolve`` runs in each child's queue (release, or
   cancel with the reason), the batch is told (``batch_ends.tell``), an expired task's callback
   and trace are told (``expired.tell``), then ``outbox_done``.

Step 3 is run at once by whoever ended the task (the worker, told over its control channel,
or ``Queue.cancel``/``delete``), and again by every worker's sweep for entries older than a
few seconds, so a crash between steps 2 and 3 (or inside 3) delays the release, never loses
it. Every step is idempotent: ``resolve`` acts once per (child, parent), a batch counts a task
once, so a repeated step never releases (or counts) twice.

Retrying a failed parent: the children it cancelled stay cancelled (they are gone, counted as
cancelled); the children it released (``on_parent_failure="run"``) have run. The retry clears
its recorded end, so children linked to it from then on wait for its new outcome.

Fault injection for tests (``faults``): ``WORQR_FAULT=drain-kill`` makes a worker kill itself (SIGKILL)
right before telling the children of an ended task, i.e. between "parent finished" and "child
released"; ``WORQR_FAULT=drain-kill-after`` after telling them, before ``outbox_done``.
"""

import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from . import batch_ends, commands, enqueueing, expired, faults, keys, readmodel
from .connection import NETWORK_ERRORS, get_default
from .errors import InvalidInput
from .options import Payload, check_names

log = logging.getLogger("worqr")

#: Tasks taken from an outbox per drain call, and children told per resolve call.
DRAIN_BATCH = 500
RESOLVE_BATCH = 500
#: A sweep leaves outbox entries younger than this to the worker that ended them (ms).
SWEEP_AGE_MS = 2000


def drain(client, queue, limit=DRAIN_BATCH, before_ms=None, dropping=False):
    """Step 3 for up to ``limit`` ended tasks of ``queue``'s outbox: tell their children (one
    ``resolve`` call per child queue and 500 children) and their batches (one ``batch_tell`` per
    batch), then take them off (``outbox_done``). Children cancelled because of it ended too:
    their queues are drained next. Returns how many were drained. Safe to run anywhere, any
    number of times, concurrently: every step is idempotent. ``dropping``: ``queue`` is being
    dropped: its own children are left to the drop, and the links go at once."""
    ids = readmodel.outbox(client, queue, limit, before_ms)
    if not ids:
        return 0
    resolves, tells, expiries = defaultdict(list), defaultdict(list), []
    for task_id, info in zip(ids, readmodel.links_many(client, queue, ids)):
        if info is None or info["outcome"] is None:  # retried since it ended: it ends again
            continue
        if "expired" in info:  # its callback's notice, its trace's span
            expiries.append((task_id, info["expired"]))
        run = info.get("run", "")  # the run span that ended it (tracing on): their spans link to it
        for child in info["children"]:
            cq = keys.queue_from_task_id(child)
            if cq is not None and not (dropping and cq == queue):
                resolves[cq].append((child, task_id, info["outcome"], run))
        if info["batch"]:
            tells[info["batch"]].append((task_id, info["outcome"], run))
    faults.kill("drain-kill")
    cascade = set()
    for cq, items in resolves.items():
        for i in range(0, len(items), RESOLVE_BATCH):
            if 2 in commands.resolve(cq, items[i : i + RESOLVE_BATCH]).run(client):
                cascade.add(cq)
    for batch_id, ended in tells.items():
        for i in range(0, len(ended), RESOLVE_BATCH):
            batch_ends.tell(client, batch_id, ended[i : i + RESOLVE_BATCH])
    for task_id, info in expiries:
        try:
            expired.tell(client, get_default().config, queue, task_id, info)
        except InvalidInput as exc:  # never expected (it was checked at its enqueue): not told
            log.error("worqr: queue %s: expired task %s: its callback is not told: %s", queue, task_id, exc)
    faults.kill("drain-kill-after")
    commands.outbox_done(queue, ids, forget=dropping).run(client)
    for cq in sorted(cascade):
        drain_all(client, cq)
    return len(ids)


def drain_all(client, queue, dropping=False):
    """Drain ``queue``'s outbox until it is empty (bounded per call)."""
    while drain(client, queue, dropping=dropping) == DRAIN_BATCH:
        pass


def sweep(client, queue, now_ms, limit=20):
    """A worker's sweep: drain up to ``limit`` outbox entries older than ``SWEEP_AGE_MS`` (left by
    a process that died between a task's end and telling its children)."""
    return drain(client, queue, limit, before_ms=now_ms - SWEEP_AGE_MS)


def tell_at_once(client, queue):
    """After an enqueue with ``after=``: drain ``queue``, so that the batches of tasks cancelled at
    once (a parent had failed) are told now; a network error leaves it to the workers' sweep."""
    try:
        drain(client, queue)
    except NETWORK_ERRORS as exc:  # they are in: the workers' sweep tells it
        log.warning("worqr: queue %s: the batches of tasks cancelled at once are told later: %s", queue, exc)


def chain(
    steps: Iterable[tuple[str, Payload] | tuple[str, Payload, dict[str, Any]]], connection: Any = None
) -> list[str]:
    """Enqueue tasks that run one after the other, each after the one before (across queues):
    ``steps`` are (queue, payload) or (queue, payload, {options}). Returns their ids. All steps
    are checked before anything is written."""
    steps = list(steps)
    if not steps:
        raise InvalidInput("chain: give at least one step")
    checked = []
    for i, step in enumerate(steps):
        if not isinstance(step, (tuple, list)) or len(step) not in (2, 3):
            raise InvalidInput(f"chain: step {i} must be (queue, payload) or (queue, payload, options)")
        options = dict(step[2]) if len(step) == 3 else {}
        if not isinstance(step[2] if len(step) == 3 else {}, dict):
            raise InvalidInput(f"chain: step {i}'s options must be a dict")
        if "after" in options:
            raise InvalidInput(f"chain: step {i} can't set after= (the chain sets it)")
        check_names(options)
        queue = keys.check_queue_name(step[0])
        enqueueing.validate(connection or get_default(), queue, [step[1]], options)
        checked.append((queue, step[1], options))
    ids: list[str] = []
    for queue, payload, options in checked:
        conn = connection or get_default()
        if ids:
            ids.append(enqueueing.enqueue_many(conn, queue, [payload], options, after=[ids[-1]])[0])
            tell_at_once(conn.enqueue_client, queue)
        elif options or not isinstance(payload, str):
            ids.append(enqueueing.enqueue_many(conn, queue, [payload], options)[0])
        else:
            ids.append(enqueueing.enqueue_plain(conn, queue, payload))
    return ids
