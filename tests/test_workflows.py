"""Workflows: ``after=`` dependencies across queues, their release or cancel, bad input, and
the idempotent cross-slot step (``workflows.drain``), driven through the engine's calls."""

import json

import pytest

from queues.engine import Queue, chain, commands, keys, readmodel, workflows
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


def test_retrying_a_failed_parent_leaves_cancelled_children_cancelled(client):
    """Retry of a failed parent: children it cancelled stay gone; children linked after wait for its new end."""
    a = Queue("p").enqueue("x", retries=0)
    b = Queue("c").enqueue("y", after=[a])
    (t,) = take(client, "p")
    fail(client, t)
    workflows.drain(client, "p")
    assert state(b) is None
    late = Queue("c").enqueue("late", after=[a])  # linked while failed: cancelled at once
    assert state(late) is None and Queue("c").counts()["cancelled"] == 2
    Queue("p").retry(a)
    c = Queue("c").enqueue("z", after=[a])
    assert state(c) == "blocked"
    (t,) = take(client, "p")
    finish(client, t)
    workflows.drain(client, "p")
    assert state(b) is None and state(c) == "pending"


def test_deleting_or_cancelling_a_parent_cancels_its_children_with_the_reason(client):
    """A deleted parent and a cancelled one cancel their children, each telling why, via the call layer."""
    a = Queue("p").enqueue("x")
    b = Queue("c").enqueue("y", after=[a])
    d = Queue("p").enqueue("w")
    e = Queue("c").enqueue("v", after=[d])
    Queue("p").delete(a)
    Queue("p").cancel(d)
    assert state(b) is None and state(e) is None
    assert readmodel.links(client, "c", b)["why"] == f"parent {a} deleted"
    assert readmodel.links(client, "c", e)["why"] == f"parent {d} cancelled"


def test_child_waits_for_every_parent_across_queues(client):
    """With parents in two queues, a child is released only after both completed."""
    a = Queue("q1").enqueue("a")
    b = Queue("q2").enqueue("b")
    c = Queue("q3").enqueue("c", after=[a, b])
    (t,) = take(client, "q1")
    finish(client, t)
    workflows.drain(client, "q1")
    assert state(c) == "blocked"
    (t,) = take(client, "q2")
    finish(client, t)
    workflows.drain(client, "q2")
    assert state(c) == "pending"


def test_a_failure_cascades_down_a_chain(client):
    """chain(): a failing first step cancels every later step, across queues."""
    ids = chain([("s1", "x", {"retries": 0}), ("s2", "x"), ("s3", "x")])
    assert [state(i) for i in ids] == ["pending", "blocked", "blocked"]
    (t,) = take(client, "s1")
    fail(client, t)
    workflows.drain(client, "s1")
    assert [state(i) for i in ids] == ["failed", None, None]
    assert Queue("s3").counts()["cancelled"] == 1 and Queue("s3").counts()["blocked"] == 0


def test_child_of_a_task_whose_result_is_kept_runs_at_once(client):
    """A completed parent (its result kept) lets a child enqueued later run at once."""
    a = Queue("p").enqueue("x")
    (t,) = take(client, "p")
    finish(client, t, result="r")
    b = Queue("c").enqueue("y", after=[a])
    assert state(b) == "pending"


def test_bad_chain_steps_write_nothing(client):
    """A malformed step anywhere in a chain is refused before any step is enqueued."""
    with pytest.raises(InvalidInput, match="step 1"):
        chain([("s1", "x"), ("s2",)])
    with pytest.raises(InvalidInput):
        chain([("s1", "x"), ("s2", "y", {"retries": -1})])
    with pytest.raises(InvalidInput, match="after"):
        chain([("s1", "x"), ("s2", "y", {"after": []})])
    with pytest.raises(InvalidInput):
        chain([])
    assert client.keys("*") == []


def test_blocked_child_released_before_it_was_enqueued(client):
    """A parent's end told before the child's enqueue ran (a race) is kept for that enqueue."""
    a = Queue("p").enqueue("x")
    child = "c-00000000000000cc"
    code, told = commands.link("p", [a], [child]).run(client)
    assert told == ["w"]
    (t,) = take(client, "p")
    finish(client, t)
    workflows.drain(client, "p")  # the child does not exist yet: the news waits for it
    doc = json.dumps({"p": [[a, "w"]]})
    commands.enqueue("c", [(child, b"y", "", "")], parents=doc).run(client)
    assert state(child) == "pending"


def test_dropping_a_queue_removes_its_blocked_tasks_and_links(client):
    """drop() takes blocked tasks, their parents' records and the workflow keys with the queue."""
    a = Queue("c").enqueue("x")
    b = Queue("c").enqueue("y", after=[a])
    Queue("c").drop()
    assert [k for k in client.keys("worqr:{c}:*")] == []
    assert state(b) is None


def test_child_of_a_parent_that_ended_and_left_nothing_counts_its_outcome(client):
    """A parent gone with no kept result and no children still releases, or cancels, a child enqueued late."""
    # The issue's own example raced: a worker finishing `a` between the two lines left nothing
    # (no result kept, no children yet), and enqueue(after=[a]) raised TaskNotFound.
    a = Queue("extract").enqueue("file-1")
    (t,) = take(client, "extract")
    assert finish(client, t) == commands.Code.COMPLETED
    assert client.exists(keys.task_key("extract", a)) == 0
    b = Queue("transform").enqueue("file-1", after=[a])
    assert state(b) == "pending"
    f = Queue("extract").enqueue("file-2", retries=0)
    (t,) = take(client, "extract")
    assert fail(client, t) == commands.Code.FAILED
    Queue("extract").delete(f)  # out of the failed set too: nothing of it is left but its record
    d = Queue("extract").enqueue("file-3")
    Queue("extract").delete(d)
    c1 = Queue("transform").enqueue("x", after=[f])
    c2 = Queue("transform").enqueue("y", after=[d])
    c3 = Queue("transform").enqueue("z", after=[f], on_parent_failure="run")
    assert state(c1) is None and state(c2) is None and state(c3) == "pending"
    assert readmodel.links(client, "transform", c1)["why"] == f"parent {f} failed"  # its first end counts
    assert readmodel.links(client, "transform", c2)["why"] == f"parent {d} deleted"
    assert readmodel.task_ends(client, [a, f, d]) == {a: "completed", f: "failed", d: "deleted"}


@pytest.fixture
def ended_max_2(monkeypatch):
    """The scripts built with keys.ENDED_MAX = 2 (built again as they were afterwards)."""
    from queues.engine import scripts

    monkeypatch.setattr(keys, "ENDED_MAX", 2)
    scripts.get.cache_clear()
    scripts._keys_and_head.cache_clear()
    yield
    monkeypatch.undo()
    scripts.get.cache_clear()
    scripts._keys_and_head.cache_clear()


def test_the_record_of_ended_tasks_is_bounded_and_a_forgotten_parent_is_a_clear_error(client, ended_max_2):
    """A queue keeps the last ENDED_MAX ends: a child of an older, forgotten parent gets TaskNotFound."""
    ids = Queue("p").enqueue_many(["1", "2", "3", "4"])
    # No producer may send an enqueue again any more (its window passed): only the last ENDED_MAX
    # are kept (test_enqueue_idempotent checks the tasks that end within a window are spared).
    client.delete(keys.queue_key("p", "resend"))
    for _ in ids:
        (t,) = take(client, "p")
        finish(client, t)
    assert client.zcard(keys.queue_key("p", "ended")) <= 3  # 2, and the one the last call added
    ttl = client.pttl(keys.queue_key("p", "ended"))  # a queue gone quiet forgets its record
    assert 0 < ttl <= keys.ENDED_KEEP_MS, ttl
    with pytest.raises(TaskNotFound, match="last 2 tasks"):
        Queue("c").enqueue("x", after=[ids[0]])
    assert state(Queue("c").enqueue("y", after=[ids[-1]])) == "pending"
    assert Queue("c").counts()["enqueued"] == 1


def test_retrying_a_failed_parent_forgets_its_recorded_end(client):
    """After a retry, a child enqueued after the parent waits for its new outcome, not its failure."""
    a = Queue("p").enqueue("x", retries=0)
    (t,) = take(client, "p")
    fail(client, t)
    Queue("p").retry(a)
    assert client.zscore(keys.queue_key("p", "ended"), a[-16:]) is None
    b = Queue("c").enqueue("y", after=[a])
    assert state(b) == "blocked"


def test_a_bulk_cancel_or_delete_tells_the_children_at_once(client):
    """Bulk cancel/delete (the dashboard's) cancels the parents' children at once, with no worker to sweep."""
    from queues.engine import bulk

    cancelled, deleted = Queue("p").enqueue("x"), Queue("p").enqueue("y")
    a, b = Queue("c").enqueue("a", after=[cancelled]), Queue("c").enqueue("b", after=[deleted])
    assert bulk.apply(client, "cancel", [cancelled]) == 1
    assert bulk.apply(client, "delete", [deleted]) == 1
    assert state(a) is None and state(b) is None
    assert readmodel.links(client, "c", a)["why"] == f"parent {cancelled} cancelled"
    assert readmodel.links(client, "c", b)["why"] == f"parent {deleted} deleted"
    assert readmodel.outbox(client, "p") == [] and Queue("c").counts()["blocked"] == 0


def test_dropping_a_queue_cancels_the_children_of_its_tasks_in_other_queues(client):
    """drop() tells its tasks' children elsewhere that their parents were deleted: they are cancelled, not stuck."""
    parents = Queue("p").enqueue_many([f"x{i}" for i in range(1203)])  # more than two drop steps
    children = Queue("c").enqueue_many([f"y{i}" for i in range(1203)], after=parents[:3])
    late = Queue("c").enqueue("z", after=[parents[-1]], on_parent_failure="run")
    Queue("p").drop()
    assert [k for k in client.keys("worqr:{p}:*")] == []
    assert state(late) == "pending" and all(state(i) is None for i in children)
    assert readmodel.links(client, "c", children[0])["why"] in {f"parent {p} deleted" for p in parents[:3]}
    c = Queue("c").counts()
    assert c["blocked"] == 0 and c["cancelled"] == 1203 and c["pending"] == 1
