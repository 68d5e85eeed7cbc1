"""Locks, unique tasks and priority queues, with real worker processes."""

import time
from collections import Counter, defaultdict

from queues import Queue
from queues.engine import keys, readmodel
from tests.conftest import records, wait_for, wait_registered


def test_1000_tasks_over_50_locks_never_overlap(client, workers):
    """1,000 tasks over 50 lock keys on 3 workers x 4 slots."""
    # each runs once, and no two tasks sharing a lock overlap in time.
    q = Queue("locks")
    ids = {}
    for i in range(1000):
        lock = f"user:{i % 50}"
        ids[q.enqueue('{"sleep": 0.005}', lock=lock)] = lock
    for i in range(3):
        workers(["locks"], concurrency=4, name=f"lk-{i}")
    wait_for(lambda: q.counts()["completed"] == 1000, timeout=90, interval=0.2, message="1,000 completions")
    recs = records(client, "locks")
    assert Counter(r["id"] for r in recs) == Counter(set(ids))
    by_lock = defaultdict(list)
    for r in recs:
        by_lock[ids[r["id"]]].append((r["start"], r["end"]))
    for lock, spans in by_lock.items():
        spans.sort()
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            assert s2 >= e1, f"{lock}: overlap {s1, e1} and {s2, e2}"
    assert q.counts()["waiting"] == 0
    assert client.zcard(keys.queue_key("locks", "lockwaits")) == 0
    assert not list(client.scan_iter(match="worqr:{locks}:lock:*"))


def test_lock_of_a_killed_holder_frees_and_waiters_run(client, workers):
    """kill -9 of a lock holder."""
    # the lock is freed within LOCK_TTL + 2 s (here the reaper frees it within the heartbeat TTL), the task is recovered
    # and its waiting siblings run.
    q = Queue("locks")
    a = workers(["locks"], concurrency=2, name="holder")
    wait_registered(client, "holder")
    first = q.enqueue('{"sleep": 3}', lock="acct:1")
    wait_for(lambda: q.counts()["active"] == 1, message="the holder to start")
    siblings = q.enqueue_many(["s1", "s2", "s3"], lock="acct:1")
    wait_for(lambda: q.counts()["waiting"] == 3, message="siblings set aside")
    assert readmodel.locks(client, "locks") == [{"lock": "acct:1", "holder": first, "worker": "holder", "waiting": 3}]
    workers(["locks"], concurrency=2, name="survivor")
    wait_registered(client, "survivor")
    a.kill()
    killed = time.monotonic()
    wait_for(
        lambda: client.get(keys.lock_key("locks", "acct:1")) is None or q.get(first).worker == "survivor",
        timeout=35 + 2,
        message="the lock to be freed",
    )
    assert time.monotonic() - killed < 35 + 2
    wait_for(lambda: q.counts()["completed"] == 4, timeout=20, message="recovered task and siblings")
    order = [r["id"] for r in records(client, "locks") if r["outcome"] == "ok"]
    assert order == [first, *siblings]
    spans = sorted((r["start"], r["end"]) for r in records(client, "locks"))
    assert all(b[0] >= a_[1] for a_, b in zip(spans, spans[1:]))


def test_locked_tasks_do_not_starve_a_lower_queue(client, workers):
    """high is full of tasks locked behind one long task."""
    # low's runnable tasks keep running meanwhile, and once high is unblocked it goes first again.
    high, low = Queue("high"), Queue("low")
    blocker = high.enqueue('{"sleep": 2}', lock="big")
    workers(["high", "low"], concurrency=2, name="prio")
    wait_for(lambda: high.counts()["active"] == 1, message="blocker running")
    high.enqueue_many(['{"sleep": 0.05}'] * 10, lock="big")
    low.enqueue_many(['{"sleep": 0.05}'] * 10)
    wait_for(lambda: low.counts()["completed"] == 10, timeout=10, message="low to drain while high is blocked")
    assert high.counts()["completed"] == 0 and high.counts()["waiting"] == 10
    low_last = max(r["end"] for r in records(client, "low"))
    assert high.get(blocker).state == "active"
    high_more = high.enqueue_many(["free"] * 3)  # unlocked high work preempts...
    low.enqueue_many(["late"] * 3)
    wait_for(
        lambda: high.counts()["completed"] == 14 and low.counts()["completed"] == 13, timeout=20, message="everything"
    )
    highs = {r["id"]: r for r in records(client, "high")}
    assert all(highs[i]["start"] > low_last for i in high_more)


def test_priority_order_with_one_slot(client, workers):
    """One worker, one slot: every high task before any mid, every mid before any low."""
    queues = {name: Queue(name) for name in ("high", "mid", "low")}
    for name in ("low", "mid", "high"):
        queues[name].enqueue_many([f"{name}{i}" for i in range(20)])
    workers(["high", "mid", "low"], concurrency=1)
    wait_for(lambda: sum(q.counts()["completed"] for q in queues.values()) == 60, timeout=30, message="60 tasks")
    allrecs = sorted((r for n in queues for r in records(client, n)), key=lambda r: r["start"])
    assert [r["queue"] for r in allrecs] == ["high"] * 20 + ["mid"] * 20 + ["low"] * 20


def test_handler_lock_function(client, workers):
    """@handler(lock=fn): the lock key comes from the payload; same customer never overlaps."""
    q = Queue("bylock")
    for i in range(6):
        q.enqueue(f"c{i % 2}:{i}")
    tid = q.enqueue("c9:x")
    assert q.get(tid).lock == "c9"
    workers(["bylock"], concurrency=4)
    wait_for(lambda: q.counts()["completed"] == 7, timeout=20, message="7 completions")


def test_unique_tasks(client, workers):
    """Duplicates while pending or active return the same id."""
    # after finish, cancel or failure the same payload can be enqueued again.
    q = Queue("t1")
    a = q.enqueue("same", unique=True)
    assert q.enqueue("same", unique=True) == a
    assert q.enqueue_many(["same", "other"], unique=True)[0] == a
    assert q.counts()["pending"] == 2
    assert q.cancel(a)
    b = q.enqueue("same", unique=True)
    assert b != a
    workers(["t1"])
    wait_for(lambda: q.get(b) is None, message="b to finish")
    c = q.enqueue("same", unique=True)
    assert c != b
    wait_for(lambda: q.get(c) is None, message="c to finish")
    f1 = Queue("retries").enqueue('{"fail": "always"}', unique=True, retries=0)
    assert Queue("retries").enqueue('{"fail": "always"}', unique=True, retries=0) == f1
    workers(["retries"])
    wait_for(lambda: Queue("retries").counts()["failed"] == 1, message="failure")
    assert Queue("retries").enqueue('{"fail": "always"}', unique=True, retries=0) != f1
    idle = Queue("t1-nobody")  # no worker: t1's could finish "x" before "y" comes on a loaded machine
    custom = idle.enqueue("x", unique="job-7")
    assert idle.enqueue("y", unique="job-7") == custom
