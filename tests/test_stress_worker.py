"""Stress: a worker's slots, names and shutdown: a stuck thread keeps its slot, a reused id is
run, tasks given back on shutdown keep their order, a second signal skips the grace, a shutdown
finishes even when the control connection drops, and a worker name can't be used twice."""

import json
import signal
import subprocess
import time
from collections import Counter

import pytest

from queues import Queue
from queues.engine import enqueueing, keys, readmodel
from queues.engine.queue import new_task_id
from tests.conftest import wait_for
from tests.stress import MARKS, events, runs, wait_ready

pytestmark = MARKS


def _starts(client, queue, tid, attempt=None):
    return [
        e for e in events(client, queue, "start") if e["id"] == tid and (attempt is None or e["attempt"] == attempt)
    ]


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_stuck_timed_out_attempt_keeps_its_slot_and_its_retry_runs(client, workers, concurrency):
    """A sync attempt stuck 6 s past its 1 s timeout keeps its thread."""
    # its retry really runs, the worker never takes a task it has no free thread for (none waits for a thread, none
    # times out unstarted) and never runs more handlers than its concurrency; every task completes.
    q = Queue("st1")
    workers(["st1"], concurrency=concurrency, name="slots")
    wait_ready(client, "slots")
    stuck = q.enqueue(json.dumps({"sleep": [6, 0.2], "ignore_cancel": True}), timeout=1, retries=1, backoff=0.1)
    wait_for(lambda: _starts(client, "st1", stuck, 2), timeout=20, message="the retried attempt to start")
    others = q.enqueue_many([json.dumps({"sleep": 1.0})] * 4, timeout=3, retries=0)
    wait_for(lambda: q.counts()["completed"] + q.counts()["failed"] == 5, timeout=40, message="every task to finish")
    wait_for(lambda: len(events(client, "st1", "end")) == 6, timeout=10, message="every run to end")
    problems = []
    for (tid, attempt), rs in runs(client, "st1").items():
        for r in rs:
            if r["waited"] is not None and r["waited"] > 0.5:
                problems.append(
                    f"{'stuck' if tid == stuck else 'a task'} (attempt {attempt}) waited {r['waited']:.1f} s for a thread"
                )
            if r["running"] > concurrency:
                problems.append(f"{r['running']} handlers ran at once with concurrency {concurrency}")
    started = {(e["id"], e["attempt"]) for e in events(client, "st1", "start")}
    for f in q.failures():
        if f["id"] != stuck and (f["id"], f["attempts"]) not in started:
            problems.append(f"a task failed ({f['error'][:40]}) without having started")
    c = q.counts()
    if c["completed"] != 5:
        problems.append(f"{c['completed']} of 5 tasks completed, {c['failed']} failed")
    assert not problems, "; ".join(problems)
    assert len(others) == 4


def test_a_task_handed_over_while_its_id_still_runs_in_a_stuck_thread_runs(client, workers):
    """A cancelled sync task runs on in its thread (it ignores the cancel)."""
    # a new task enqueued with the same id (not remembered) is handed to the same worker, which has a free slot: it
    # runs, rather than staying active and unrun.
    q = Queue("st1")
    workers(["st1"], concurrency=2, name="same-id")
    wait_ready(client, "same-id")
    tid = new_task_id("st1")
    q.enqueue_many([json.dumps({"sleep": 4, "ignore_cancel": True})], ids=[tid])
    wait_for(lambda: _starts(client, "st1", tid), message="the first task to start")
    assert q.cancel(tid) is True
    wait_for(lambda: q.get(tid) is None, message="the cancel to be acknowledged")
    # Enqueue is idempotent by id: an id is not added again while its task is remembered as ended
    # (the queue's last 10,000 ended tasks, and all that ended within its resend window). The same
    # id comes back only once that record has let it go: as if 10,000 tasks had ended since.
    client.zrem(keys.queue_key("st1", "ended"), tid[-16:])
    prepared = enqueueing.prepare(q.connection.config, q.name, [json.dumps({"sleep": 0.1})])
    enqueueing.enqueue_prepared(q.connection, q.name, prepared, [tid], remember=False)
    t0 = time.monotonic()
    ran = None
    while ran is None and time.monotonic() - t0 < 10:
        if len(_starts(client, "st1", tid)) == 2:
            ran = time.monotonic() - t0
        time.sleep(0.02)
    task = q.get(tid)
    assert ran is not None, (
        f"the second task with id {tid} did not run in 10 s (the stuck thread ended after 4 s); "
        f"it is {task.state if task else 'gone'} on {task.worker if task else '-'}"
    )
    wait_for(lambda: q.get(tid) is None, message="the second task to complete")
    assert q.counts()["completed"] == 1 and q.counts()["cancelled"] == 1


@pytest.mark.parametrize("queue", ["st1", "sta1"], ids=["sync", "async"])
def test_a_graceful_shutdown_gives_tasks_back_in_their_order(client, workers, queue):
    """A worker with three slots runs T1, T2, T3 (started in that order) and T4 waits."""
    # SIGTERM with a 1 s grace: afterwards the pending order is T1, T2, T3, T4.
    q = Queue(queue)
    w = workers([queue], concurrency=3, name="order", grace=1)
    wait_ready(client, "order")
    started = []
    for _ in range(3):
        started.append(q.enqueue(json.dumps({"sleep": 60})))
        wait_for(lambda: _starts(client, queue, started[-1]), message="the task to start")
    waiting = q.enqueue("T4")
    w.signal(signal.SIGTERM)
    assert w.wait(20) == 0
    order = [t.id for t in readmodel.pending(client, queue, 0, 10)]
    names = {tid: f"T{i + 1}" for i, tid in enumerate([*started, waiting])}
    assert order == [*started, waiting], f"pending order after shutdown: {[names.get(i, i) for i in order]}"
    assert all(q.get(t).attempt == 0 for t in started)


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_stop_signal_skips_the_grace(client, workers, second):
    """SIGTERM with a 60 s grace while a task runs on."""
    # a second SIGTERM (or SIGINT) makes the worker give the task back and exit within 3 s.
    q = Queue("st1")
    w = workers(["st1"], concurrency=1, name="twice", grace=60)
    wait_ready(client, "twice")
    tid = q.enqueue(json.dumps({"sleep": 120}))
    wait_for(lambda: _starts(client, "st1", tid), message="the task to start")
    w.signal(signal.SIGTERM)
    time.sleep(0.5)  # the first signal is handled: the worker waits out its grace
    w.signal(second)
    t0 = time.monotonic()
    try:
        code = w.wait(15)
    except subprocess.TimeoutExpired:
        code = None
    took = time.monotonic() - t0
    assert code == 0 and took < 3, (
        f"after the second signal the worker {'exited' if code is not None else 'was still running'} "
        f"{took:.1f} s later (exit code {code})"
    )
    assert q.get(tid).state == "pending"


def test_a_shutdown_finishes_when_the_control_connection_drops_at_the_same_time(client, workers):
    """A worker frozen (SIGSTOP) with a task running, its control connection killed and SIGTERM sent, then thawed."""
    # it gives the task back and exits within 10 s, six times out of six.
    q = Queue("st1")
    for i in range(6):
        w = workers(["st1"], concurrency=1, name=f"drop-{i}", grace=0)
        wait_ready(client, f"drop-{i}")
        tid = q.enqueue(json.dumps({"sleep": 30}))
        wait_for(lambda tid=tid: _starts(client, "st1", tid), message="the task to start")
        w.signal(signal.SIGSTOP)
        client.client_kill_filter(_type="pubsub")
        w.signal(signal.SIGTERM)
        w.signal(signal.SIGCONT)
        try:
            code = w.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 0, (
            f"round {i + 1}: the worker is still running 10 s after SIGTERM (given back: {q.get(tid).state})"
        )
        q.delete(tid)


def test_a_second_worker_with_a_live_workers_name_refuses_to_start(client, workers):
    """A worker started with the --name of a live worker exits non-zero with a message naming it, and every task ..."""
    # ... of the first one runs exactly once.
    q = Queue("st1")
    workers(["st1"], concurrency=2, name="twin")
    wait_ready(client, "twin")
    ids = q.enqueue_many([json.dumps({"sleep": 0.5})] * 20)
    wait_for(lambda: q.counts()["active"] == 2, message="the first twin to be busy")
    second = workers(["st1"], concurrency=2, name="twin")
    try:
        code = second.wait(15)
    except subprocess.TimeoutExpired:
        code = None
    wait_for(lambda: q.counts()["completed"] == 20, timeout=60, message="the 20 tasks")
    twice = [tid for tid, n in Counter(e["id"] for e in events(client, "st1", "start")).items() if n > 1]
    problems = []
    if code is None:
        problems.append("the second worker named twin is still running 15 s later")
    elif code == 0 or "twin" not in second.output():
        problems.append(f"the second worker exited {code} without naming the clash: {second.output()[-300:]!r}")
    if twice:
        problems.append(f"{len(twice)} of {len(ids)} tasks ran twice")
    assert not problems, "; ".join(problems)
