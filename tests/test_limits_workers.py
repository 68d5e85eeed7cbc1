"""Limits with real worker processes: concurrency across workers, the rate's sliding window,
partitions served fairly, a kill -9'd worker's slots, set_limits seen at once, and the slots a
timed-out sync handler's thread keeps until it returns."""

import json
import time

from queues import Queue
from queues.engine import keys
from tests.conftest import records, wait_for, wait_registered
from tests.support.limits import overlap

TTL = 3.0  # tests/settings.py HEARTBEAT_TTL


def test_concurrency_holds_across_three_workers(client, workers):
    """concurrency=2 over three workers of 4 slots: 20 tasks of 0.3 s never overlap more than 2, and 2 do."""
    for i in range(3):
        workers(["lim-conc"], concurrency=4, name=f"lc{i}")
    for i in range(3):
        wait_registered(client, f"lc{i}")
    Queue("lim-conc").enqueue_many([json.dumps({"sleep": 0.3, "n": i}) for i in range(20)])
    recs = wait_for(lambda: (r := records(client, "lim-conc")) and len(r) == 20 and r, timeout=30, message="20 tasks")
    # Three idle workers with free slots are offered the 20 tasks at once: a limit kept per worker
    # would let them overlap up to 6. Which worker runs them is not asserted: a worker that ends a
    # task may rightly take the freed slot itself.
    assert overlap(recs) == 2


def test_rate_holds_over_any_window(client, workers):
    """rate=(5, 2): over 20 tasks no 2-second window holds more than 5 starts, and the pace is the limit's."""
    workers(["lim-rate"], concurrency=4, name="lr0")
    workers(["lim-rate"], concurrency=4, name="lr1")
    wait_registered(client, "lr0")
    wait_registered(client, "lr1")
    Queue("lim-rate").enqueue_many([json.dumps({"n": i}) for i in range(20)])
    recs = wait_for(lambda: (r := records(client, "lim-rate")) and len(r) == 20 and r, timeout=30, message="20 tasks")
    starts = sorted(r["start"] for r in recs)
    assert _most_in_a_window(starts, 2.0) <= 5  # by the handlers' clock, to the microsecond
    span = starts[-1] - starts[0]
    assert 5.9 <= span <= 7.5, span  # four windows of 5 (and their 0.2 s start grace): the limit's pace


def _most_in_a_window(starts, window):
    """The most of ``starts`` (times, s) in any half-open window of ``window`` seconds."""
    starts = sorted(starts)
    return max((sum(1 for t in starts if s <= t < s + window) for s in starts), default=0)


def test_a_handler_that_starts_late_never_puts_more_than_the_rate_in_a_window(client, workers):
    """rate=(2, 1), async: a task taken with one that blocks the event loop is not run late: no 1 s window sees 3 starts."""
    w = workers(["lim-arate"], concurrency=2, name="late0")
    wait_registered(client, "late0")
    # Taken two at a time: [blocks, quick], then [quick, quick] as the window opens again. The
    # first quick one would start 0.6 s after Redis counted it, and the next two on time, within
    # one second of it: three starts in a second of the handlers' clock.
    payloads = [json.dumps({"block": 0.6, "n": i}) if i % 4 == 0 else json.dumps({"n": i}) for i in range(12)]
    Queue("lim-arate").enqueue_many(payloads)
    recs = wait_for(lambda: (r := records(client, "lim-arate")) and len(r) == 12 and r, timeout=40, message="12 tasks")
    assert _most_in_a_window([r["start"] for r in recs], 1.0) <= 2, (
        sorted(r["start"] for r in recs),
        w.output()[-3000:],
    )
    assert sorted(json.loads(r["payload"])["n"] for r in recs) == list(range(12))  # each ran once
    # (the last record is written before its handler returns, and its acknowledgement follows)
    wait_for(lambda: Queue("lim-arate").counts()["completed"] == 12, timeout=10, message="12 completed")


def test_partitions_are_served_fairly(client, workers):
    """1,000 tasks of customer A then 3 of B, partition_concurrency=1: B's finish long before A's tail."""
    q = Queue("lim-fair")
    q.enqueue_many([json.dumps({"c": "A", "n": i}) for i in range(1000)])
    q.enqueue_many([json.dumps({"c": "B", "n": i}) for i in range(3)])
    workers(["lim-fair"], concurrency=4, name="lf0")
    workers(["lim-fair"], concurrency=4, name="lf1")
    wait_for(lambda: len(records(client, "lim-fair")) == 1003, timeout=120, message="1,003 tasks")
    recs = records(client, "lim-fair")
    order = [json.loads(r["payload"])["c"] for r in sorted(recs, key=lambda r: r["end"])]
    assert max(i for i, c in enumerate(order) if c == "B") < 20  # B's last is among the first 20 of 1,003
    assert overlap([r for r in recs if json.loads(r["payload"])["c"] == "A"]) == 1


def test_a_killed_workers_slots_come_back_within_the_recovery_time(client, workers):
    """kill -9 of a worker holding both slots of concurrency=2: another worker runs them within TTL + 2 s."""
    q = Queue("lim-kill")
    a = workers(["lim-kill"], concurrency=4, name="lk-a")
    wait_registered(client, "lk-a")
    q.enqueue_many([json.dumps({"sleep": 20}) for _ in range(2)])
    wait_for(lambda: client.scard(keys.worker_tasks_key("lim-kill", "lk-a")) == 2, message="a to hold both slots")
    workers(["lim-kill"], concurrency=4, name="lk-b")
    wait_registered(client, "lk-b")
    q.enqueue_many([json.dumps({"sleep": 20}) for _ in range(2)])
    assert q.limits()["held_back"] == 2
    a.kill()
    killed = time.monotonic()
    wait_for(
        lambda: client.scard(keys.worker_tasks_key("lim-kill", "lk-b")) == 2,
        timeout=TTL + 4,
        message="b to take the freed slots",
    )
    assert time.monotonic() - killed < TTL + 2
    assert q.limits()["active"] == 2


def test_set_limits_reaches_running_workers_at_once(client, workers):
    """Raising concurrency from 1 to 3 starts the held-back tasks on a running worker at once, not when its task ends."""
    q = Queue("lim-set")
    workers(["lim-set"], concurrency=4, name="ls0")
    wait_registered(client, "ls0")
    q.enqueue_many([json.dumps({"sleep": 5}) for _ in range(3)])
    wait_for(lambda: q.limits()["active"] == 1, message="one task active")
    assert q.limits()["held_back"] == 2
    (first,) = client.zrange(keys.queue_key("lim-set", "active"), 0, -1)
    # Nothing but the wake-up set_limits sends makes the worker look again before its 5 s task
    # ends: the held-back tasks starting while that task still runs is the signal (a wall-clock
    # bound would judge the machine's load; quiet, this takes a few ms).
    q.set_limits(concurrency=3)
    wait_for(lambda: client.zcard(keys.queue_key("lim-set", "active")) == 3, timeout=2.5, interval=0.002)
    assert client.zscore(keys.queue_key("lim-set", "active"), first) is not None  # the first still runs
    q.set_limits(reset=True)
    assert q.limits()["concurrency"] == 1


def test_raising_partition_concurrency_reaches_running_workers_at_once(client, workers):
    """Raising partition_concurrency from 1 to 3 starts a parked customer's tasks on a running worker at once."""
    q = Queue("lim-fair")
    workers(["lim-fair"], concurrency=4, name="lf2")
    wait_registered(client, "lf2")
    q.enqueue_many([json.dumps({"c": "A", "sleep": 5, "n": i}) for i in range(3)])
    wait_for(lambda: q.limits()["active"] == 1, message="one task active")
    time.sleep(0.2)  # the worker has looked again and found A parked
    assert q.limits()["active"] == 1 and client.hget(keys.queue_key("lim-fair", "partitions"), "A") == b"b"
    (first,) = client.zrange(keys.queue_key("lim-fair", "active"), 0, -1)
    q.set_limits(partition_concurrency=3)  # as above: started while the first (5 s) still runs
    wait_for(lambda: client.zcard(keys.queue_key("lim-fair", "active")) == 3, timeout=2.5, interval=0.002)
    assert client.zscore(keys.queue_key("lim-fair", "active"), first) is not None


def test_a_limited_queue_never_blocks_a_lower_priority_one(client, workers):
    """A worker serving a limited queue first and another after runs the other's tasks in the free slots."""
    workers(["lim-conc", "low"], concurrency=4, name="lp0")
    wait_registered(client, "lp0")
    Queue("lim-conc").enqueue_many([json.dumps({"sleep": 2}) for _ in range(6)])
    wait_for(lambda: Queue("lim-conc").limits()["active"] == 2, message="the limited queue at its limit")
    Queue("low").enqueue_many([json.dumps({"sleep": 0}) for _ in range(2)])
    wait_for(lambda: len(records(client, "low")) == 2, timeout=3, message="the lower queue's tasks")
    assert not records(client, "lim-conc")  # the limited ones still run (held back, not bouncing)


def test_a_held_back_queue_costs_redis_nothing_while_it_waits(client, workers, slowlog):
    """Tasks held back by a limit are not re-scanned: between two heartbeats the idle worker calls no start."""
    from queues.engine import scripts

    q = Queue("lim-set")
    workers(["lim-set"], concurrency=4, name="lh0")
    wait_registered(client, "lh0")
    q.enqueue_many([json.dumps({"sleep": 8}) for _ in range(3)])
    wait_for(lambda: q.limits()["active"] == 1 and client.sismember(keys.queue_key("lim-set", "idle"), "lh0"))
    shas = {name: s.sha.encode() for name, s in scripts.load_all().items()}
    slowlog(0)  # log every command from now on

    def calls(name):
        return sum(1 for e in client.slowlog_get(100000) if e["command"].split(b" ")[:2] == [b"EVALSHA", shas[name]])

    wait_for(lambda: calls("heartbeat") >= 2, timeout=10, message="two heartbeats of the idle worker")
    assert calls("start") == 0 and q.limits()["held_back"] == 2


def _by_n(recs):
    return {json.loads(r["payload"])["n"]: r for r in recs}


def _failed(client, queue):
    from queues.engine import readmodel

    return readmodel.queue_counts(client, queue)["failed"]


def test_a_timed_out_thread_keeps_its_concurrency_slot_until_it_returns(client, workers):
    """concurrency=1, a 3 s sync handler with timeout=1: the next task starts only once its thread returned."""
    # The worker has a free thread for the second task all along: only the limit can hold it back.
    q = Queue("lim-keep")
    workers(["lim-keep"], concurrency=4, name="lk0")
    wait_registered(client, "lk0")
    q.enqueue_many([json.dumps({"sleep": 3, "deaf": True, "n": i}) for i in range(2)])
    wait_for(lambda: _failed(client, "lim-keep") == 1, timeout=5, message="the first task to time out")
    lim = q.limits()
    assert (lim["active"], lim["kept"], lim["held_back"]) == (1, 1, 1)
    recs = wait_for(lambda: (r := records(client, "lim-keep")) and len(r) == 2 and r, timeout=15, message="2 runs")
    first, second = _by_n(recs)[0], _by_n(recs)[1]
    assert second["start"] >= first["end"] - 0.05, (first, second)  # never two handlers at once
    assert second["start"] - first["end"] < 1.0  # and the freed slot is taken at once
    wait_for(lambda: q.limits()["active"] == 0, timeout=5, message="both slots given back")


def test_a_timed_out_thread_keeps_its_partition_slot_until_it_returns(client, workers):
    """partition_concurrency=1: A's next task waits for A's timed-out thread to return; B runs meanwhile."""
    q = Queue("lim-pkeep")
    workers(["lim-pkeep"], concurrency=4, name="lpk0")
    wait_registered(client, "lpk0")
    q.enqueue_many([json.dumps({"c": "A", "sleep": 3, "deaf": True, "n": i}) for i in range(2)])
    wait_for(lambda: _failed(client, "lim-pkeep") == 1, timeout=5, message="A's first task to time out")
    q.enqueue(json.dumps({"c": "B", "n": 2}))
    recs = wait_for(lambda: (r := records(client, "lim-pkeep")) and len(r) == 3 and r, timeout=15, message="3 runs")
    a1, a2, b = _by_n(recs)[0], _by_n(recs)[1], _by_n(recs)[2]
    assert a2["start"] >= a1["end"] - 0.05, (a1, a2)  # never two of A's handlers at once
    assert b["end"] < a1["end"], (a1, b)  # B was not held back by A's kept slot
    wait_for(lambda: q.limits()["partitions"]["most_active"] == 0, timeout=5, message="A's slots given back")


def test_a_killed_workers_kept_slot_comes_back_within_the_recovery_time(client, workers):
    """kill -9 of a worker whose timed-out thread keeps the only slot: another runs the next within TTL + 2 s."""
    q = Queue("lim-keep")
    a = workers(["lim-keep"], concurrency=4, name="lkk-a")
    wait_registered(client, "lkk-a")
    q.enqueue(json.dumps({"sleep": 60, "deaf": True, "n": 0}))
    wait_for(lambda: _failed(client, "lim-keep") == 1, timeout=5, message="the first task to time out")
    workers(["lim-keep"], concurrency=4, name="lkk-b")
    wait_registered(client, "lkk-b")
    q.enqueue(json.dumps({"n": 1}))
    time.sleep(1.0)
    assert not records(client, "lim-keep")  # held back by the slot the running thread keeps
    assert q.limits()["kept"] == 1 and q.limits()["held_back"] == 1
    a.kill()
    killed = time.monotonic()
    wait_for(lambda: records(client, "lim-keep"), timeout=TTL + 4, message="b to run the next task")
    assert time.monotonic() - killed < TTL + 2
    (rec,) = records(client, "lim-keep")
    assert json.loads(rec["payload"])["n"] == 1
    wait_for(lambda: q.limits()["active"] == 0, timeout=5, message="no slot left in use")
    assert q.limits()["kept"] == 0


def test_a_slot_kept_for_a_delivery_the_worker_never_got_is_released(client, workers):
    """The heartbeat times out a task its live holder never received: the holder releases the kept slot."""
    # Redis records the task as the worker's (a hand-over lost on the way), so the worker's own
    # timeout never fires; past timeout + grace the heartbeat takes it and keeps its slot for a
    # handler it believes runs. The worker, told with that lease, frees it: the next task runs.
    from queues.engine import commands

    q = Queue("lim-keep")
    workers(["lim-keep"], concurrency=4, name="lkl0")
    wait_registered(client, "lkl0")
    q.enqueue(json.dumps({"n": -1}))  # once it has run, the worker is up, has taken stock, and idles
    wait_for(lambda: records(client, "lim-keep"), timeout=10, message="the first task to run")
    # acknowledged: the call that did it also put the worker in the idle set (it will not look
    # again until woken), so taking it out below is not undone by that call coming later
    wait_for(lambda: q.counts()["completed"] == 1, timeout=10, message="the first task's acknowledgement")
    idle = keys.queue_key("lim-keep", "idle")
    wait_for(lambda: client.srem(idle, "lkl0"), timeout=5, message="the worker to idle")  # no hand-over now
    q.enqueue(json.dumps({"n": 0}), timeout=1)
    lost = commands.start("lim-keep", "lkl0", 1, lock_ttl=30, grace=2, default_timeout=0, result_ttl=60).run(client)
    assert [t.id for t in lost.tasks], lost  # taken in the worker's name, never handed to it
    # listed as idle again, as the worker believes it is: an idle worker that finds itself
    # unlisted takes stock, and would give the task back before the heartbeat's path is tried
    client.sadd(idle, "lkl0")
    q.enqueue(json.dumps({"n": 1}))
    time.sleep(0.5)
    assert len(records(client, "lim-keep")) == 1  # the lost task holds the only slot
    wait_for(lambda: len(records(client, "lim-keep")) == 2, timeout=10, message="the next task to run")
    assert [json.loads(r["payload"])["n"] for r in records(client, "lim-keep")] == [-1, 1]
    wait_for(lambda: q.limits()["kept"] == 0 and q.limits()["active"] == 0, timeout=5, message="no slot kept")
