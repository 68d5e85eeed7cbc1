"""Batches: counters, states, callbacks enqueued exactly once, cancel, bad input (engine calls)."""

import pytest

from queues.engine import Batch, BatchNotFound, Queue, commands, keys, readmodel, workflows
from queues.engine.errors import InvalidInput, InvalidState, InvalidTask
from tests.engine_calls import fail, finish, take


def run_all(client, queue, fails=()):
    """Take every task of ``queue``, fail those whose payload is in ``fails``, finish the rest, drain."""
    while tasks := take(client, queue, count=100):
        for t in tasks:
            if t.payload in fails:
                fail(client, t)
            else:
                finish(client, t)
        workflows.drain_all(client, queue)


def test_batch_succeeds_and_fires_both_callbacks_once(client):
    """A batch over two queues: counts, state succeeded, on_success and on_complete enqueued once."""
    b = Batch(on_success=("reports", "ok"), on_complete=("audit", "done"), description="nightly")
    b.enqueue("imports", "row-1")
    b.enqueue_many("exports", ["e1", "e2"], retries=2)
    info = Batch.get(b.id)
    assert info["state"] == "open" and info["total"] == 3 and info["pending"] == 3
    assert info["description"] == "nightly"
    run_all(client, "imports")
    assert Batch.get(b.id)["completed"] == 1
    b.close()
    assert Batch.get(b.id)["state"] == "running"
    assert Queue("reports").counts()["enqueued"] == 0
    run_all(client, "exports")
    info = Batch.get(b.id)
    assert info["state"] == "succeeded" and info["completed"] == 3 and info["finished_at"] is not None
    assert info["pending"] == info["active"] == 0
    assert Queue("reports").counts()["enqueued"] == 1 and Queue("audit").counts()["enqueued"] == 1
    (cb,) = take(client, "audit")
    assert cb.batch_id == b.id and cb.batch["state"] == "succeeded"
    # a repeated step (a sweep after a crash) adds nothing
    commands.batch_tell(b.id, [(cb.id, "completed")]).run(client)
    from queues.engine import batches

    client.hset(keys.batch_key(b.id, "batch"), "cb", "due")
    batches.fire_callbacks(client, b.id)
    assert Queue("audit").counts()["enqueued"] == 1 and Queue("reports").counts()["enqueued"] == 1


def test_batch_with_a_failure_fires_only_on_complete(client):
    """One failed task: finished_with_failures, on_complete only."""
    b = Batch(on_success=("reports", "ok"), on_complete=("audit", "done"))
    b.enqueue_many("imports", ["a", "bad", "c"], retries=0)
    b.close()
    run_all(client, "imports", fails=("bad",))
    info = Batch.get(b.id)
    assert info["state"] == "finished_with_failures" and (info["completed"], info["failed"]) == (2, 1)
    assert Queue("reports").counts()["enqueued"] == 0 and Queue("audit").counts()["enqueued"] == 1


def test_empty_batch_closes_into_success_at_once(client):
    """Closing a batch with no tasks fires its callbacks at once."""
    b = Batch(on_complete=("audit", "done"))
    b.close()
    assert Batch.get(b.id)["state"] == "succeeded"
    assert Queue("audit").counts()["enqueued"] == 1


def test_cancelling_a_batch_cancels_its_unfinished_tasks(client):
    """Batch.cancel cancels pending tasks and asks running ones to stop; on_complete fires after."""
    b = Batch(on_success=("reports", "ok"), on_complete=("audit", "done"))
    b.enqueue_many("imports", ["a", "b", "c"])
    (running,) = take(client, "imports")
    assert b.cancel() == 3
    info = Batch.get(b.id)
    assert info["cancelled"] == 2 and info["state"] == "running" and info["cancel_requested"]
    finish(client, running)  # it was asked to stop: counted cancelled
    workflows.drain_all(client, "imports")
    info = Batch.get(b.id)
    assert info["state"] == "finished_with_failures" and info["cancelled"] == 3
    assert Queue("audit").counts()["enqueued"] == 1 and Queue("reports").counts()["enqueued"] == 0


def test_batch_bad_input_writes_nothing(client):
    """Closed batch, malformed callbacks, bad ids, unique tasks: a clear error and nothing written."""
    for bad in (("q",), ("q", 1), "q", ("bad name", "x"), ["q", "x"]):
        with pytest.raises(InvalidInput):
            Batch(on_success=bad)
    assert client.keys("*") == []
    b = Batch()
    b.close()
    before = sorted(client.keys("*"))
    with pytest.raises(InvalidState, match="closed"):
        b.enqueue("imports", "x")
    with pytest.raises(InvalidTask):
        b.enqueue("imports", "x", unique=True)
    assert sorted(client.keys("*")) == before
    with pytest.raises(InvalidInput):
        Batch.get("nope")
    assert Batch.get("b-0000000000000000") is None
    with pytest.raises(BatchNotFound):
        Batch.open("b-0000000000000000").close()


def test_batch_counts_active_tasks_per_queue(client):
    """Running tasks of a batch count as active, the rest of the unfinished as pending."""
    b = Batch()
    b.enqueue_many("imports", ["a", "b"])
    take(client, "imports")
    info = Batch.get(b.id)
    assert (info["active"], info["pending"]) == (1, 1)
    assert readmodel.batches(client)[0] == [b.id]


def test_cancel_ends_tasks_reserved_but_never_enqueued(client):
    """A batch whose producer died between reserving ids and enqueueing them is ended by cancel."""
    b = Batch(on_complete=("audit", "done"))
    b.enqueue("imports", "real")
    commands.batch_add(b.id, "imports", ["imports-00000000000000ff"]).run(client)  # never enqueued
    assert b.cancel() == 2
    info = Batch.get(b.id)
    assert info["state"] == "finished_with_failures" and info["cancelled"] == 2
    assert Queue("audit").counts()["enqueued"] == 1


def test_sweep_fires_callbacks_a_dead_process_left_due(client):
    """A batch finished by a process that died before enqueueing its callbacks: the sweep does it, once."""
    from queues.engine import batches

    b = Batch(on_success=("reports", "ok"), on_complete=("audit", "done"))
    (tid,) = b.enqueue_many("imports", ["a"])
    b.close()
    assert commands.batch_tell(b.id, [(tid, "completed")]).run(client) is True  # finished; the process dies here
    assert Queue("audit").counts()["enqueued"] == 0
    now = int(client.time()[0]) * 1000
    batches.sweep(client, now + 5000)
    batches.sweep(client, now + 10000)
    assert Queue("audit").counts()["enqueued"] == 1 and Queue("reports").counts()["enqueued"] == 1
    assert client.zscore(keys.BATCHES_DUE, b.id) is None and Batch.get(b.id)["callbacks_enqueued"]
