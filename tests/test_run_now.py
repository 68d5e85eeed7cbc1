"""Run now: a delayed task becomes runnable at once (before the pending tasks, or after them),
atomically; a task no longer delayed is refused and left as it is."""

import pytest

from queues import Queue
from queues.engine.errors import InvalidState
from tests.engine_calls import take


def test_run_now_puts_a_delayed_task_first(client):
    """A delayed task run now is the next task taken, ahead of the pending ones; it is delayed no more."""
    q = Queue("runnow")
    q.enqueue_many(["a", "b"])
    later = q.enqueue("later", delay=3600)
    assert q.counts()["delayed"] == 1
    assert q.run_now(later) is True
    counts = q.counts()
    assert (counts["delayed"], counts["pending"]) == (0, 3)
    (first,) = take(client, "runnow")
    assert first.id == later


def test_run_now_at_the_tail(client):
    """where="tail": it runs after the tasks already pending."""
    q = Queue("runnow-tail")
    q.enqueue("a")
    later = q.enqueue("later", delay=3600)
    q.run_now(later, where="tail")
    assert [t.id for t in take(client, "runnow-tail", count=2)][1] == later


def test_run_now_refuses_a_task_no_longer_delayed(client):
    """A pending task (or one run now already) is refused: InvalidState, nothing moves."""
    q = Queue("runnow-refused")
    pending = q.enqueue("now")
    later = q.enqueue("later", delay=3600)
    q.run_now(later)
    for task_id in (pending, later):
        with pytest.raises(InvalidState, match="not delayed"):
            q.run_now(task_id)
    assert q.counts()["pending"] == 2
