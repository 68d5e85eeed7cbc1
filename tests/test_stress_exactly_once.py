"""Stress: exactly one worker per task (under pub/sub reconnects, and against a frozen worker's
late report), and counts() that add up at every read while everything moves."""

import json
import random
import signal
import threading
import time
from collections import Counter

import pytest

from queues import Queue
from queues.engine import readmodel
from queues.engine.errors import InvalidState, TaskNotFound
from tests.conftest import wait_for
from tests.stress import MARKS, PubSubKiller, events, runs, scaled, starts_per_id, wait_ready

pytestmark = MARKS


@pytest.mark.parametrize("queue", ["st1", "sta1"])
def test_rapid_pubsub_kills_during_continuous_enqueue_run_every_task_once(client, workers, redis_server, queue):
    """Two workers x 4 slots, tasks enqueued for 20 s, pub/sub killed every 30-150 ms: each runs once."""
    q = Queue(queue)
    for i, name in enumerate(("pk-a", "pk-b")):
        workers([queue], concurrency=4, name=name)
        wait_ready(client, name, i + 1)
    rng = random.Random(11)
    ids = []
    # Kills 30-150 ms apart (the README's figure): some find the workers still reconnecting
    # (their first backoff), most make both resubscribe and take stock; about 250 tasks a second
    # keeps them idle most of the time, so most tasks are handed over in the wake-up message.
    with PubSubKiller(redis_server.url, 0.03, 0.15, seed=12) as killer:
        deadline = time.monotonic() + scaled(20, 180)
        while time.monotonic() < deadline:
            ids.append(q.enqueue(json.dumps({"sleep": rng.choice([0, 0.005, 0.02, 0.05])})))
            time.sleep(rng.uniform(0, 0.006))
    wait_for(lambda: q.counts()["completed"] == len(ids), timeout=60, interval=0.2, message=f"{len(ids)} completions")
    started = starts_per_id(client, queue)
    twice = {i: n for i, n in started.items() if n > 1}
    per_run = runs(client, queue)
    concurrent = [i for i in twice if _ran_concurrently(per_run, i)]
    assert not twice, (
        f"{len(twice)} of {len(ids)} tasks ran more than once ({len(concurrent)} of them concurrently), "
        f"with {killer.kills} pub/sub kills: {sorted(twice.items())[:5]}"
    )
    assert set(started) == set(ids)
    ends = events(client, queue, "end")
    assert len(ends) == len(ids) and all(e["outcome"] == "ok" for e in ends)
    c = q.counts()
    assert (c["pending"], c["active"], c["failed"], c["cancelled"]) == (0, 0, 0, 0)


def _ran_concurrently(per_run, task_id):
    spans = sorted((r["start"], r["end"] or float("inf")) for (i, _), rs in per_run.items() if i == task_id for r in rs)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def test_a_frozen_workers_late_completion_is_refused_while_the_rescuer_runs(client, workers):
    """A worker frozen (SIGSTOP) mid-task past the heartbeat TTL loses the task to another worker."""
    # thawed while the rescuer runs attempt 2, its handler completes and that completion is refused: the task stays
    # active on the rescuer until the rescuer's run ends, and completes once.
    q = Queue("st1")
    frozen = workers(["st1"], concurrency=1, name="frozen")
    wait_ready(client, "frozen")
    tid = q.enqueue(json.dumps({"sleep": [1.0, 5.0], "ignore_cancel": True}))
    wait_for(lambda: _start_of(client, "st1", tid, 1), message="attempt 1 on the frozen worker")
    frozen.signal(signal.SIGSTOP)
    workers(["st1"], concurrency=1, name="rescuer")
    wait_for(lambda: _start_of(client, "st1", tid, 2), timeout=20, message="the rescuer to run attempt 2")
    assert q.get(tid).worker == "rescuer"
    frozen.signal(signal.SIGCONT)
    gone_at = None
    deadline = time.monotonic() + 20
    while gone_at is None and time.monotonic() < deadline:
        if q.get(tid) is None:
            gone_at = time.time()
        time.sleep(0.01)
    assert gone_at is not None, "the task never completed"
    rescued = wait_for(lambda: _end_of(client, "st1", tid, 2), timeout=15, message="the rescuer's run to end")
    late = wait_for(lambda: _end_of(client, "st1", tid, 1), message="the frozen worker's run to end")
    assert late[0]["outcome"] == "ok", "the frozen worker's handler did not complete after the thaw"
    assert gone_at >= rescued[0]["t"], (
        f"the task left Redis {rescued[0]['t'] - gone_at:.1f} s before the rescuer's run ended: "
        "the frozen worker's stale completion was accepted"
    )
    c = q.counts()
    assert (c["completed"], c["active"], c["pending"], c["enqueued"]) == (1, 0, 0, 1)


def _start_of(client, queue, tid, attempt):
    return [e for e in events(client, queue, "start") if e["id"] == tid and e["attempt"] == attempt]


def _end_of(client, queue, tid, attempt):
    return [e for e in events(client, queue, "end") if e["id"] == tid and e["attempt"] == attempt]


def test_counts_add_up_at_every_read_while_two_workers_drain(client, workers):
    """Two workers drain tasks with failures, retries, delays, locks, cancels and deletes for 20 s while ..."""
    # ... Queue.counts() and readmodel.overview() (with 2-82 queues) are read in tight loops: completed + failed +
    # cancelled + deleted + pending + delayed + active == enqueued at every read.
    busy = [Queue(n) for n in ("st1", "st4")]
    for i in range(2):
        workers(["st1", "st4"], concurrency=4, name=f"inv-{i}")
    stop = threading.Event()
    bad, reads = [], Counter()

    def check(where, c):
        total = sum(c[k] for k in ("completed", "failed", "cancelled", "deleted", "pending", "delayed", "active"))
        reads[where] += 1
        if total != c["enqueued"]:
            bad.append((where, total - c["enqueued"], {k: v for k, v in c.items() if v and k != "name"}))

    def read_counts():
        while not stop.is_set():
            for q in busy:
                check(f"counts({q.name})", q.counts())

    def read_overview():
        while not stop.is_set():
            for c in readmodel.overview(client):
                check("overview", c)

    def slide_fillers():
        # Idle queues that sort just before st1 and st4 come and go, 40 at most: the busy queues'
        # reads slide along the overview's pipeline, across the points where Redis reads it in parts.
        while not stop.is_set():
            for step in [*range(40), *range(39, -1, -1)]:
                for prefix in ("st0", "st3"):
                    filler = Queue(f"{prefix}-{step:02d}")
                    filler.drop() if filler.counts()["enqueued"] else filler.enqueue("filler")
                if stop.wait(0.01):
                    return

    readers = [threading.Thread(target=f, daemon=True) for f in (read_counts, read_overview, slide_fillers)]
    for t in readers:
        t.start()
    rng = random.Random(3)
    try:
        deadline = time.monotonic() + scaled(20, 180)
        while time.monotonic() < deadline:
            for q in busy:
                _mixed_batch(q, rng)
            time.sleep(0.2)
        wait_for(
            lambda: all(q.counts()["pending"] + q.counts()["delayed"] + q.counts()["active"] == 0 for q in busy),
            timeout=90,
            interval=0.2,
            message="the queues to drain",
        )
    finally:
        stop.set()
        for t in readers:
            t.join(5)
    assert not bad, f"{len(bad)} of {sum(reads.values())} reads did not add up; first: {bad[:3]}"
    assert all(reads.values()) and set(reads) == {"counts(st1)", "counts(st4)", "overview"}
    for q in busy:
        c = q.counts()
        assert c["enqueued"] > 1000 and c["completed"] and c["failed"] and c["cancelled"] and c["deleted"]


def _mixed_batch(q, rng):
    """Enqueue 50 tasks of every kind, then cancel, delete and retry a few of the queue's tasks."""
    plain = [json.dumps({"sleep": rng.choice([0, 0.002, 0.01])}) for _ in range(35)]
    ids = q.enqueue_many(plain)
    ids += q.enqueue_many([json.dumps({"fail": "always"})] * 4, retries=0)
    ids += q.enqueue_many([json.dumps({"fail": 1})] * 4, retries=1, backoff=0.05)
    ids += q.enqueue_many(["later"] * 3, delay=rng.uniform(0.05, 0.5))
    ids += q.enqueue_many(["locked"] * 4, lock=f"L{rng.randrange(3)}")
    for tid in rng.sample(ids, 4):
        try:
            q.cancel(tid)
        except InvalidState:  # it failed meanwhile
            pass
    for tid in rng.sample(ids, 3):
        try:
            q.delete(tid)
        except (InvalidState, TaskNotFound):  # running, or gone already
            pass
    for task in readmodel.failed(q.client, q.name, 0, 2):
        try:
            q.delete(task.id) if rng.random() < 0.5 else q.retry(task.id)
        except (InvalidState, TaskNotFound):
            pass
