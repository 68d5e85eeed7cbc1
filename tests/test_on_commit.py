"""Transactional enqueue: Queue.enqueue(..., on_commit=True) and the Tasks backend enqueue only
when the database transaction commits, never when it rolls back."""

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from queues import Queue
from queues.backends import WorqrBackend
from queues.backends.framework import TaskResultDoesNotExist, TaskResultStatus
from queues.engine.errors import InvalidTask, PayloadTooLarge
from tests.conftest import wait_for
from tests.tasksapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


class Rollback(Exception):
    pass


def test_enqueued_when_the_transaction_commits():
    """Inside atomic() the id is returned at once but the task only exists after the commit."""
    q = Queue("oc-commit")
    with transaction.atomic():
        task_id = q.enqueue("hello", on_commit=True)
        assert task_id.startswith("oc-commit-")
        assert q.get(task_id) is None and q.counts()["enqueued"] == 0
    task = q.get(task_id)
    assert task.state == "pending" and task.payload == "hello"
    assert q.counts()["enqueued"] == 1


def test_never_enqueued_when_the_transaction_rolls_back():
    """A rolled back transaction drops the enqueue."""
    q = Queue("oc-rollback")
    with pytest.raises(Rollback), transaction.atomic():
        task_id = q.enqueue("never", on_commit=True)
        raise Rollback
    assert q.get(task_id) is None and q.counts()["enqueued"] == 0


def test_savepoint_rollback_drops_only_its_enqueues():
    """An enqueue made in a rolled back savepoint is dropped; the outer one still happens."""
    q = Queue("oc-savepoint")
    with transaction.atomic():
        kept = q.enqueue("kept", on_commit=True)
        with pytest.raises(Rollback), transaction.atomic():
            dropped = q.enqueue("dropped", on_commit=True)
            raise Rollback
    assert q.get(kept).payload == "kept" and q.get(dropped) is None
    assert q.counts()["enqueued"] == 1


def test_outside_a_transaction_or_without_on_commit_it_enqueues_at_once():
    """on_commit=True in autocommit mode, and on_commit=False anywhere, enqueue immediately."""
    q = Queue("oc-now")
    assert q.get(q.enqueue("a", on_commit=True)).state == "pending"
    with transaction.atomic():
        task_id = q.enqueue("b")
        assert q.get(task_id).state == "pending"


def test_enqueue_many_keeps_ids_order_and_options():
    """enqueue_many(on_commit=True) returns the ids the tasks get at commit, in order, with their options (here ..."""
    # ... a delay).
    q = Queue("oc-many")
    with transaction.atomic():
        ids = q.enqueue_many(["1", "2", "3"], on_commit=True, delay=60, retries=2)
    tasks_ = [q.get(i) for i in ids]
    assert [t.payload for t in tasks_] == ["1", "2", "3"]
    assert {t.state for t in tasks_} == {"delayed"} and {t.retries for t in tasks_} == {2}


def test_ids_survive_a_lock_function_that_splits_the_call():
    """A handler's lock function splits enqueue_many per lock key; the promised ids still hold."""
    q = Queue("bylock")
    with transaction.atomic():
        ids = q.enqueue_many(["a:1", "b:2", "a:3"], on_commit=True)
    assert [q.get(i).payload for i in ids] == ["a:1", "b:2", "a:3"]
    assert [q.get(i).lock for i in ids] == ["a", "b", "a"]


def test_bad_calls_fail_at_the_call_not_at_commit():
    """Payload and option errors are raised inside the transaction, before anything is deferred."""
    q = Queue("oc-bad")
    with transaction.atomic():
        with pytest.raises(InvalidTask):
            q.enqueue({"not": "text"}, on_commit=True)
        with pytest.raises(InvalidTask):
            q.enqueue("x", on_commit=True, delay=-1)
        with pytest.raises(PayloadTooLarge):
            q.enqueue("x" * (q.connection.config.max_payload_bytes + 1), on_commit=True)
        with pytest.raises(InvalidTask, match="unique"):
            q.enqueue("x", on_commit=True, unique=True)
    assert q.counts()["enqueued"] == 0


def test_tasks_backend_runs_only_against_committed_rows(workers):
    """The Tasks backend defers by default: the task sees the row its transaction wrote."""
    workers(["dt-default"])
    with transaction.atomic():
        User.objects.create(username="committed")
        result = tasks.user_exists.enqueue("committed")
        assert Queue("dt-default").get(result.id) is None
    assert result.enqueued_at is not None

    def done():
        result.refresh()
        return result.is_finished

    wait_for(done, 20, interval=0.05, message="the task to finish")
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value is True


def test_tasks_backend_rollback_enqueues_nothing():
    """Rolled back: no task, and its result does not exist."""
    with pytest.raises(Rollback), transaction.atomic():
        User.objects.create(username="rolled-back")
        result = tasks.user_exists.enqueue("rolled-back")
        raise Rollback
    assert result.enqueued_at is None
    assert Queue("dt-default").counts()["enqueued"] == 0
    with pytest.raises(TaskResultDoesNotExist):
        result.refresh()


def test_tasks_backend_on_commit_can_be_turned_off():
    """OPTIONS ON_COMMIT=False enqueues at once, even inside a transaction."""
    backend = WorqrBackend("now", {"QUEUES": ["dt-default"], "OPTIONS": {"ON_COMMIT": False}})
    with pytest.raises(Rollback), transaction.atomic():
        result = backend.enqueue(tasks.add, [1, 2], {})
        raise Rollback
    assert Queue("dt-default").get(result.id).state == "pending"
