"""Workflows: ``after=`` dependencies across queues, their release or cancel, bad input, and
the idempotent cross-slot step (``workflows.drain``), driven through the engine's calls."""

import pytest

from queues.engine import Queue, commands, keys, readmodel, workflows
from queues.engine.errors import InvalidInput, TaskNotFound
from tests.engine_calls import fail, finish, take


def state(task_id):
    """The task's state in Redis, or None."""
    return (
        Queue(keys.queue_from_task_id(task_id)).get(task_id)
        and Queue(keys.queue_from_task_id(task_id)).get(task_id).state
    )


def test_child_is_blocked_until_its_parent_in_another_queue_completes(client):
    """A child waits, blocked and counted so, until its parent (another queue) completes and is drained."""
    a = Queue("extract").enqueue("f1")
    b = Queue("transform").enqueue("f1", after=[a])
    assert state(b) == "blocked"
    assert Queue("transform").counts()["blocked"] == 1
    assert take(client, "transform") == []
    (t,) = take(client, "extract")
    assert finish(client, t) == commands.Code.COMPLETED
    assert state(b) == "blocked"  # not told yet: a separate step
    assert readmodel.outbox(client, "extract") == [a]
    workflows.drain(client, "extract")
    assert state(b) == "pending"
    assert readmodel.outbox(client, "extract") == []
    c = Queue("transform").counts()
    assert c["blocked"] == 0 and c["pending"] == 1
    (t2,) = take(client, "transform")
    assert t2.id == b


def test_failed_parent_cancels_child_or_releases_it_with_run(client):
    """A parent failing for good cancels a 'cancel' child (with its reason) and releases a 'run' one."""
    a = Queue("p").enqueue("x", retries=0)
    b = Queue("c").enqueue("y", after=[a])
    c = Queue("c").enqueue("z", after=[a], on_parent_failure="run")
    (t,) = take(client, "p")
    assert fail(client, t) == commands.Code.FAILED
    workflows.drain(client, "p")
    assert state(b) is None and state(c) == "pending"
    counts = Queue("c").counts()
    assert counts["cancelled"] == 1 and counts["blocked"] == 0 and counts["pending"] == 1
    assert readmodel.links(client, "c", b)["why"] == f"parent {a} failed"


def test_drain_is_idempotent(client):
    """Telling a child twice (a sweep after a crash) releases it once."""
    a = Queue("p").enqueue("x")
    b = Queue("c").enqueue("y", after=[a])
    (t,) = take(client, "p")
    finish(client, t)
    assert commands.resolve("c", [(b, a, "completed")]).run(client) == [1]
    assert commands.resolve("c", [(b, a, "completed")]).run(client) == [0]
    workflows.drain(client, "p")
    c = Queue("c").counts()
    assert c["pending"] == 1 and c["blocked"] == 0 and c["enqueued"] == 1


def test_bad_after_input_writes_nothing(client):
    """Unknown parents, non-ids, a cycle, too many parents, a bad mode: a clear error, nothing written."""
    q = Queue("c")
    with pytest.raises(TaskNotFound):
        q.enqueue("x", after=["p-0123456789abcdef"])
    with pytest.raises(InvalidInput, match="not a task id"):
        q.enqueue("x", after=["nope"])
    with pytest.raises(InvalidInput, match="at most 1000"):
        q.enqueue("x", after=[f"p-{i:016x}" for i in range(1001)])
    tid = "c-00000000000000aa"
    with pytest.raises(InvalidInput, match="cycle"):
        q.enqueue_many(["x"], ids=[tid], after=[tid])
    with pytest.raises(InvalidInput, match="on_parent_failure"):
        q.enqueue("x", after=[], on_parent_failure="maybe")
    with pytest.raises(InvalidInput, match="list of task ids"):
        q.enqueue("x", after="p-0123456789abcdef")
    assert client.keys("*") == []
