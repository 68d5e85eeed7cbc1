"""Stress: big backlogs never block Redis. Every script call stays under a bound (SLOWLOG on the
test Redis), and a worker busy with a long task is never presumed dead meanwhile."""

import json
import time

import pytest

from queues import Queue
from queues.engine import keys, readmodel
from tests.conftest import wait_for
from tests.stress import (
    MARKS,
    Tolerant,
    describe_slow,
    events,
    overlapping,
    runs,
    scaled,
    slow_commands,
    wait_beats,
    wait_ready,
    wait_until,
)

pytestmark = MARKS


@pytest.mark.parametrize("paused", [False, True], ids=["backlog", "paused-then-resumed"])
def test_300000_tasks_behind_one_lock_never_block_redis(client, workers, slowlog, paused):
    """300,000 tasks on one lock (enqueued behind a busy worker, or while paused then resumed)."""
    # no command takes over 50 ms during enqueue, start, a short drain, purge and drop, and a long task on another
    # worker is never presumed dead and run again.
    q = Queue("st2")
    n = scaled(300_000, 1_000_000)
    started = {"big-long": workers(["st2"], concurrency=1, name="big-long")}
    wait_ready(client, "big-long")
    long = q.enqueue(json.dumps({"sleep": 120}))
    wait_for(lambda: events(client, "st2", "start"), timeout=10, message="the long task to start")
    if paused:
        started["big-lock"] = workers(["st2"], concurrency=2, name="big-lock")
        wait_ready(client, "big-lock", 2)
        q.pause()
    stalls = slowlog(50_000)
    t0 = time.monotonic()
    ids = q.enqueue_many(["0"] * n, lock="x")
    enqueue_s = time.monotonic() - t0
    if paused:
        q.resume()
    else:  # its first fetch meets the whole backlog
        started["big-lock"] = workers(["st2"], concurrency=2, name="big-lock")
    tolerant = Tolerant()
    drained = wait_until(tolerant(lambda: q.counts()["completed"] >= 5), timeout=30)
    purged = q.purge()
    silent = wait_beats(client, list(started))  # a worker presumed dead meanwhile is reaped by now
    long_starts = [e for e in events(client, "st2", "start") if e["id"] == long]
    in_drop = len(slow_commands(client, 50_000, stalls))
    q.drop()
    slow = slow_commands(client, 50_000, stalls)
    in_drop = len(slow) - in_drop
    problems = []
    if slow:
        problems.append(
            f"{len(slow)} command(s) over 50 ms ({in_drop} in drop; enqueue of {n:,} took {enqueue_s:.1f} s, "
            f"purge removed {purged:,}): {describe_slow(slow)}"
        )
    if tolerant.errors:
        problems.append(f"Redis refused {len(tolerant.errors)} reads meanwhile: {tolerant.errors[0]}")
    if len(long_starts) != 1:
        problems.append(f"the long task ran {len(long_starts)} times: its worker was presumed dead")
    if not drained:
        problems.append("fewer than 5 locked tasks ran in 30 s")
    for name, w in started.items():
        if w.proc.poll() is not None:
            problems.append(f"worker {name} died (exit {w.proc.returncode}): {w.output().strip().splitlines()[-1]}")
        elif name in silent:
            problems.append(f"worker {name} stopped sending heartbeats")
    assert not problems, " / ".join(problems)
    assert len(ids) == n
    locked = [(r["start"], r["end"], tid) for (tid, _), rs in runs(client, "st2").items() if tid != long for r in rs]
    bad = overlapping(locked)
    assert not bad, "; ".join(bad)


def test_cancel_and_delete_in_the_middle_of_1000000_pending_are_fast(client, slowlog):
    """With 1,000,000 tasks pending, cancelling or deleting one in the middle (or at the tail) takes under 5 ms ..."""
    # ... in Redis: not a scan of the pending list.
    q = Queue("st3")
    n = 1_000_000
    ids = []
    for _ in range(n // 100_000):
        ids += q.enqueue_many(["0"] * 100_000)
    stalls = slowlog(5_000)
    t0 = time.perf_counter()
    assert q.cancel(ids[n // 2]) is True
    cancel_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    assert q.delete(ids[n // 2 + 1]) is True
    delete_ms = (time.perf_counter() - t0) * 1000
    assert q.cancel(ids[-1]) is True
    assert q.delete(ids[-2]) is True
    slow = slow_commands(client, 5_000, stalls)
    c = q.counts()
    assert (c["pending"], c["cancelled"], c["deleted"]) == (n - 4, 2, 2)
    around = [t.id for t in readmodel.pending(client, "st3", n // 2 - 1, 10)]
    assert around[:3] == [ids[n // 2 - 1], ids[n // 2 + 2], ids[n // 2 + 3]]
    assert slow == [], (
        f"cancel took {cancel_ms:.1f} ms, delete {delete_ms:.1f} ms round trip; over 5 ms in Redis: "
        + describe_slow(slow)
    )
    client.flushall(asynchronous=True)  # free the memory now


def test_drop_of_300000_lock_waiters_never_blocks_redis(client, slowlog):
    """Dropping a queue with 300,000 tasks waiting on one lock (no purge first): no call over 50 ms."""
    # The other test purges before it drops, so its drop meets an almost empty queue: here drop
    # itself empties the lock's wait list, which one unbounded call did in 1.7 s.
    q = Queue("st4")
    n = scaled(300_000, 1_000_000)
    ids = q.enqueue_many(["0"] * n, lock="x")
    c = q.counts()
    assert (c["runnable"], c["waiting"]) == (1, n - 1)
    stalls = slowlog(50_000)
    t0 = time.monotonic()
    q.drop()
    drop_s = time.monotonic() - t0
    slow = slow_commands(client, 50_000, stalls)
    assert q.counts()["waiting"] == 0 and not client.exists(keys.task_key("st4", ids[-1]))
    assert slow == [], f"drop of {n:,} lock waiters took {drop_s:.1f} s; over 50 ms: {describe_slow(slow)}"
