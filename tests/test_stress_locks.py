"""Stress: locks stay exclusive while a stuck holder runs on, waiters are promoted one at a time
and in order, and nothing is stranded behind a purged, failed, cancelled or killed holder."""

import json
import signal
import time

import pytest

from queues import Queue
from queues.engine import readmodel
from tests.conftest import wait_for
from tests.stress import MARKS, events, overlapping, runs, wait_ready

pytestmark = MARKS


def _started(client, queue, task_id, attempt=None):
    return lambda: [
        e for e in events(client, queue, "start") if e["id"] == task_id and (attempt is None or e["attempt"] == attempt)
    ]


def _ended(client, queue, task_id):
    return lambda: [e for e in events(client, queue, "end") if e["id"] == task_id]


def _spans(client, queue, ids):
    return [(r["start"], r["end"], tid) for (tid, _), rs in runs(client, queue).items() if tid in ids for r in rs]


@pytest.mark.parametrize(
    "queue, how",
    [("stlock", "timeout"), ("stlock", "cancel"), ("stalock", "timeout")],
    ids=["sync-timeout", "sync-cancel", "async-timeout"],
)
def test_a_lock_stays_held_until_a_stuck_holder_really_stops(client, workers, queue, how):
    """A holder that ignores its 1 s timeout (or a cancel) runs on for 3 s (a sync handler that never looks, an ..."""
    # ... async one that swallows the cancel): a second task with the same lock, free to run on another worker, never
    # overlaps it.
    q = Queue(queue)
    for i, name in enumerate(("lx-a", "lx-b")):
        workers([queue], concurrency=1, name=name)
        wait_ready(client, name, i + 1)
    options = {"retries": 0} if how == "timeout" else {"retries": 0, "timeout": 30}
    first = q.enqueue(json.dumps({"lock": "X", "sleep": 3, "ignore_cancel": True}), **options)
    wait_for(_started(client, queue, first), message="the holder to start")
    second = q.enqueue(json.dumps({"lock": "X", "sleep": 0.5}), timeout=30)
    wait_for(lambda: q.counts()["waiting"] == 1, message="the second task to wait for the lock")
    if how == "cancel":
        assert q.cancel(first) is True
    wait_for(
        lambda: _ended(client, queue, first)() and _ended(client, queue, second)(),
        timeout=20,
        message="both runs to end",
    )
    names = {first: "the holder", second: "the second task"}
    spans = [(s, e, names[tid]) for s, e, tid in _spans(client, queue, set(names))]
    bad = overlapping(spans)
    assert not bad, "; ".join(bad)
    wait_for(
        lambda: (lambda c: (c["pending"], c["active"], c["completed"]) == (0, 0, 1))(q.counts()),
        message="the second task acknowledged, nothing left",
    )


def test_purge_leaves_no_lock_waiter_pending(client, workers):
    """Purge with a holder running and two tasks waiting on its lock."""
    # counts() reports nothing pending (or waiting) afterwards, and the purged waiters never run.
    q = Queue("st1")
    workers(["st1"], concurrency=2, name="pg")
    wait_ready(client, "pg")
    holder = q.enqueue(json.dumps({"sleep": 2}), lock="L")
    wait_for(_started(client, "st1", holder), message="the holder to start")
    waiters = q.enqueue_many(["w1", "w2"], lock="L")
    wait_for(lambda: q.counts()["waiting"] == 2, message="two waiters")
    q.purge()
    after = q.counts()
    wait_for(_ended(client, "st1", holder), timeout=10, message="the holder to end")
    sentinel = q.enqueue("sentinel", lock="L")  # runs after any waiter of L left behind
    wait_for(lambda: q.get(sentinel) is None, timeout=10, message="a later task on L to run")
    end = q.counts()
    assert (after["pending"], after["waiting"]) == (0, 0), f"after purge: {after}"
    assert (end["pending"], end["waiting"], end["active"]) == (0, 0, 0), f"after the holder ended: {end}"
    assert not [e for e in events(client, "st1", "start") if e["id"] in waiters]


def test_purge_of_a_requeued_holder_strands_no_waiter(client, workers):
    """The holder of lock L is given back by a stopping worker (it goes to the front, ahead of its two waiters) ..."""
    # ... and then purged: counts() reports nothing pending, and the lock is free at once: no waiter is left to run
    # LOCK_TTL (35 s) later.
    q = Queue("st1")
    a = workers(["st1"], concurrency=2, name="pq-a", grace=0)
    wait_ready(client, "pq-a")
    holder = q.enqueue(json.dumps({"sleep": 30}), lock="L")
    wait_for(_started(client, "st1", holder), message="the holder to start")
    q.enqueue_many(["w1", "w2"], lock="L")
    wait_for(lambda: q.counts()["waiting"] == 2, message="two waiters")
    a.signal(signal.SIGTERM)
    assert a.wait(15) == 0
    assert [t.id for t in readmodel.pending(client, "st1", 0, 10)] == [holder]
    q.purge()
    after = q.counts()
    workers(["st1"], concurrency=2, name="pq-b")
    wait_ready(client, "pq-b")
    t0 = time.monotonic()
    deadline = t0 + 8
    while time.monotonic() < deadline and (q.counts()["pending"] or q.counts()["active"]):
        time.sleep(0.05)
    settled = time.monotonic() - t0
    problems = []
    if (after["pending"], after["waiting"]) != (0, 0):
        problems.append(f"after purge counts() shows pending={after['pending']} waiting={after['waiting']}")
    if q.counts()["pending"]:
        problems.append(f"{q.counts()['waiting']} waiter(s) still stranded {settled:.0f} s later, the lock free")
    assert not problems, "; ".join(problems)
    fresh = q.enqueue("fresh", lock="L")
    wait_for(lambda: q.get(fresh) is None, timeout=5, message="a new task on L to run")


def test_promoted_waiters_of_several_locks_keep_their_order(client, workers):
    """Holders of L1, L2, L3 finish in that order while B1, B2, B3 wait on them and the queue is paused."""
    # the promoted waiters are pending in the order B1, B2, B3 (first promoted, first served), not the reverse.
    q = Queue("st1")
    workers(["st1"], concurrency=4, name="fifo")
    wait_ready(client, "fifo")
    # released in the order L1, L2, L3 (0.4 s apart)
    holders = [q.enqueue(json.dumps({"sleep": 1.2 + 0.4 * i}), lock=f"L{i}") for i in (1, 2, 3)]
    wait_for(lambda: q.counts()["active"] == 3, message="three holders")
    waiters = [q.enqueue(f"B{i}", lock=f"L{i}") for i in (1, 2, 3)]
    wait_for(lambda: q.counts()["waiting"] == 3, message="three waiters")
    q.pause()
    wait_for(lambda: q.counts()["completed"] == 3, timeout=10, message="the holders to finish")
    wait_for(lambda: q.counts()["waiting"] == 0, message="the waiters to be promoted")
    order = [t.id for t in readmodel.pending(client, "st1", 0, 10)]
    assert order == waiters, f"pending order {[f'B{waiters.index(i) + 1}' for i in order]}"
    assert not set(order) & set(holders)
    q.resume()
    wait_for(lambda: q.counts()["completed"] == 6, message="the waiters to run")


def test_waiters_of_one_lock_run_in_the_order_they_were_enqueued(client, workers):
    """B, C, D wait on lock L behind holder A on a worker with two slots: they run B, C, D, one at a time."""
    q = Queue("st1")
    workers(["st1"], concurrency=2, name="one-lock")
    wait_ready(client, "one-lock")
    a = q.enqueue(json.dumps({"sleep": 1}), lock="L")
    wait_for(_started(client, "st1", a), message="the holder to start")
    waiters = q.enqueue_many([json.dumps({"sleep": 0.2})] * 3, lock="L")
    wait_for(lambda: q.counts()["completed"] == 4, timeout=15, message="all four")
    starts = [e["id"] for e in events(client, "st1", "start")]
    assert starts == [a, *waiters]
    bad = overlapping(_spans(client, "st1", {a, *waiters}))
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("death", ["kill-9", "stop"])
def test_a_cancelled_holder_that_dies_promotes_one_waiter_at_a_time(client, workers, redis_server, death):
    """Holder A of lock L is cancelled and its worker then dies (kill -9) or stops (SIGTERM, the cancel message ..."""
    # ... lost) before reporting: the waiters B, C, D run in that order, never two at once.
    q = Queue("st1")
    holder_worker = workers(["st1"], concurrency=1, name="cd-a", grace=0)
    wait_ready(client, "cd-a")
    holder = q.enqueue(json.dumps({"sleep": 30}), lock="L")
    wait_for(_started(client, "st1", holder), message="the holder to start")
    workers(["st1"], concurrency=1, name="cd-y")
    wait_ready(client, "cd-y", 2)
    waiters = [q.enqueue(json.dumps({"sleep": 0.3, "name": n}), lock="L") for n in "BCD"]
    wait_for(lambda: q.counts()["waiting"] == 3, message="B, C, D waiting")
    holder_worker.signal(signal.SIGSTOP)
    if death == "kill-9":
        assert q.cancel(holder) is True
        holder_worker.kill()
    else:
        client.client_kill_filter(_type="pubsub")  # the frozen worker will not hear of the cancel
        assert q.cancel(holder) is True
        holder_worker.signal(signal.SIGTERM)
        holder_worker.signal(signal.SIGCONT)
    wait_for(lambda: q.counts()["completed"] == 3, timeout=20, message="B, C, D to run")
    starts = [e["id"] for e in events(client, "st1", "start") if e["id"] in waiters]
    names = {tid: n for tid, n in zip(waiters, "BCD")}
    assert starts == waiters, f"ran in the order {''.join(names[i] for i in starts)}"
    bad = overlapping(_spans(client, "st1", set(waiters)))
    assert not bad, "; ".join(bad)
    c = q.counts()
    assert (c["cancelled"], c["pending"], c["active"]) == (1, 0, 0)


@pytest.mark.parametrize("retries", [0, 1])
def test_a_failed_holder_frees_its_lock_at_once(client, workers, retries):
    """A locked task fails (out of attempts, or with a retry to come) while another waits on the same lock."""
    # the waiter starts within 1.5 s of the failure, not LOCK_TTL later.
    q = Queue("st1")
    workers(["st1"], concurrency=2, name="lf")
    wait_ready(client, "lf")
    failing = q.enqueue(json.dumps({"sleep": 0.3, "fail": "always"}), lock="L", retries=retries, backoff=5)
    wait_for(_started(client, "st1", failing), message="the failing holder to start")
    waiter = q.enqueue("waiter", lock="L")
    wait_for(lambda: q.counts()["waiting"] == 1, message="the waiter")
    end = wait_for(_ended(client, "st1", failing), timeout=10, message="the holder to fail")[0]
    assert end["outcome"] == "raised"
    deadline = time.monotonic() + 6
    while not _started(client, "st1", waiter)() and time.monotonic() < deadline:
        time.sleep(0.02)
    start = _started(client, "st1", waiter)()
    assert start, f"the waiter had not started 6 s after the failure ({q.counts()['waiting']} waiting)"
    assert start[0]["t"] - end["t"] < 1.5, f"the waiter started {start[0]['t'] - end['t']:.1f} s after the failure"
