"""Workflows with real worker processes: chains across queues, a failing middle step, batches
with failures and a kill -9, and the fault-injection test of the cross-queue release step."""

import json
import random
import signal

from queues.engine import Batch, Queue, chain, keys, readmodel
from tests.conftest import records, wait_for, wait_registered


def ran(client, queue):
    """Records of the handler runs of ``queue`` that ended ok."""
    return [r for r in records(client, queue) if r["outcome"] == "ok"]


def test_chains_across_three_queues_run_in_order_under_two_workers(client, workers):
    """Five chains t1 -> t2 -> t3, two workers: each step starts after the one before ended."""
    for n in ("wa", "wb"):
        workers(["t1", "t2", "t3"], concurrency=4, name=n)
    chains = [chain([("t1", f"c{i}"), ("t2", f"c{i}"), ("t3", f"c{i}")]) for i in range(5)]
    wait_for(lambda: len(ran(client, "t3")) == 5, timeout=30, message="every chain's last step")
    by_id = {r["id"]: r for q in ("t1", "t2", "t3") for r in ran(client, q)}
    for ids in chains:
        steps = [by_id[i] for i in ids]
        assert steps[0]["start"] <= steps[0]["end"] <= steps[1]["start"] <= steps[1]["end"] <= steps[2]["start"]
    for q in ("t1", "t2", "t3"):  # a handler records its run before its worker acknowledges it
        wait_for(lambda q=q: Queue(q).counts()["completed"] == 5, timeout=10, message=f"{q}'s acknowledgements")
        c = Queue(q).counts()
        assert (c["completed"], c["blocked"], c["enqueued"]) == (5, 0, 5)


def test_failing_middle_step_cancels_the_tail(client, workers):
    """A middle step failing for good cancels the last step, which never runs."""
    workers(["t1", "t2", "t3"], concurrency=2, name="wa")
    ids = chain([("t1", "x"), ("t2", json.dumps({"fail": "always"}), {"retries": 0}), ("t3", "never")])
    wait_for(lambda: Queue("t3").counts()["cancelled"] == 1, timeout=20, message="the tail cancelled")
    assert Queue("t2").get(ids[1]).state == "failed"
    assert records(client, "t3") == [] and Queue("t3").counts()["blocked"] == 0
    assert readmodel.links(client, "t3", ids[2])["why"] == f"parent {ids[1]} failed"


def _fault_run(client, workers, fault):
    """A worker with ``fault`` finishes a parent and dies before (or after) telling the child; a
    second worker of the parent's queue sweeps. Returns the child's id."""
    parent = Queue("t1").enqueue("parent")
    child = Queue("t2").enqueue("child", after=[parent])
    w2 = workers(["t2"], name="child-worker")
    wait_registered(client, "child-worker")
    dying = workers(["t1"], name="dying", env={"WORQR_FAULT": fault})
    assert dying.wait(20) == -signal.SIGKILL
    assert [r["id"] for r in ran(client, "t1")] == [parent]
    workers(["t1"], name="sweeper")
    wait_for(lambda: len(ran(client, "t2")) >= 1, timeout=20, message="the child to run")
    assert w2.proc.poll() is None
    return child


def test_a_crash_between_parent_end_and_child_release_loses_nothing(client, workers):
    """Killed (fault injection) between "parent finished" and "child released": the sweep releases it once."""
    child = _fault_run(client, workers, "drain-kill")
    wait_for(lambda: readmodel.outbox(client, "t1") == [], timeout=10, message="the outbox drained")
    assert [r["id"] for r in ran(client, "t2")] == [child]
    wait_for(lambda: Queue("t2").counts()["completed"] == 1, timeout=10, message="the child acknowledged")
    c = Queue("t2").counts()
    assert (c["completed"], c["blocked"], c["cancelled"]) == (1, 0, 0)


def test_a_crash_after_the_release_never_releases_twice(client, workers):
    """Killed after telling the child but before taking the parent off the outbox."""
    # the sweep repeats the step, and the child still runs exactly once.
    child = _fault_run(client, workers, "drain-kill-after")
    wait_for(lambda: readmodel.outbox(client, "t1") == [], timeout=10, message="the outbox drained")
    wait_for(lambda: Queue("t2").counts()["completed"] == 1, timeout=10, message="the child completed")
    assert [r["id"] for r in ran(client, "t2")] == [child]
    assert Queue("t2").counts()["enqueued"] == 1


def test_batch_of_500_over_two_queues_with_failures_and_a_kill(client, workers):
    """500 tasks over t1 and t2, random failures, one worker killed -9 mid-way."""
    # counts exact and on_complete enqueued exactly once (on_success never: there were failures).
    rng = random.Random(15)
    fails = {i for i in range(500) if rng.random() < 0.1}
    b = Batch(on_success=("t5", "success"), on_complete=("t6", "complete"), description="500")
    for q, part in (("t1", range(0, 250)), ("t2", range(250, 500))):
        payloads = [json.dumps({"n": i, "sleep": 0.01, **({"fail": "always"} if i in fails else {})}) for i in part]
        b.enqueue_many(q, payloads, retries=0)
    b.close()
    victim = workers(["t1", "t2", "t5", "t6"], concurrency=4, name="victim")
    workers(["t1", "t2", "t5", "t6"], concurrency=4, name="survivor")
    wait_for(lambda: Batch.get(b.id)["completed"] >= 150, timeout=60, message="a third of the batch")
    victim.kill()
    workers(["t1", "t2", "t5", "t6"], concurrency=4, name="victim")  # restarted under its name
    wait_for(lambda: Batch.get(b.id)["finished_at"] is not None, timeout=90, message="the batch to finish")
    wait_for(lambda: len(ran(client, "t6")) == 1, timeout=20, message="on_complete to run")
    info = Batch.get(b.id)
    assert info["state"] == "finished_with_failures"
    assert (info["total"], info["completed"], info["failed"], info["cancelled"]) == (
        500,
        500 - len(fails),
        len(fails),
        0,
    )
    assert (info["pending"], info["active"]) == (0, 0)
    (cb,) = ran(client, "t6")
    assert cb["batch"] == b.id
    wait_for(lambda: client.zscore(keys.BATCHES_DUE, b.id) is None, timeout=10, message="the batch off the due list")
    assert Queue("t5").counts()["enqueued"] == 0 and Queue("t6").counts()["enqueued"] == 1
