"""Task controls at enqueue, through the scripts (no worker process): expiry ends a task that
was not started in time as ``expired``, a throttle's window adds one task, a debounce keeps one
task not started yet with the last payload and due time; bad options write nothing."""

import time
from datetime import UTC, datetime, timedelta

import pytest

from queues import Queue
from queues.engine import keys
from queues.engine.errors import InvalidTask
from tests.engine_calls import register, take


def _flush_delayed(client, queue):
    """Make every delayed task of ``queue`` due now (its due time rewritten in Redis)."""
    key = keys.queue_key(queue, "delayed")
    for member in client.zrange(key, 0, -1):
        client.zadd(key, {member: 0})


def test_a_task_not_started_before_it_expires_never_starts_and_reads_expired(client):
    """expires=1 into a paused queue, resumed after 1.2 s: nothing is taken, counts and the list say expired."""
    q = Queue("ex-paused")
    q.pause()
    task_id = q.enqueue("late", expires=1)
    kept = q.enqueue("in time", expires=60)
    assert q.counts()["pending"] == 2
    time.sleep(1.2)
    q.resume()
    taken = take(client, "ex-paused", count=5)
    assert [t.id for t in taken] == [kept]
    counts = q.counts()
    assert counts["expired"] == 1 and counts["pending"] == 0 and counts["active"] == 1
    (entry,) = q.expired()
    assert entry["id"] == task_id and entry["state"] == "expired"
    assert entry["expired_at"] >= entry["expires_at"] > entry["created_at"]
    assert q.get(task_id) is None


def test_a_task_resumed_in_time_runs(client):
    """expires=30, taken at once: it starts."""
    q = Queue("ex-in-time")
    task_id = q.enqueue("x", expires=30)
    assert [t.id for t in take(client, "ex-in-time")] == [task_id]
    assert q.counts()["expired"] == 0


def test_an_expired_lock_head_lets_the_next_waiter_run(client):
    """The lock's runnable head expires: the waiter behind it becomes runnable and is taken."""
    q = Queue("ex-lock")
    q.pause()
    head = q.enqueue("a", lock="L", expires=0.2)
    waiter = q.enqueue("b", lock="L")
    time.sleep(0.4)
    q.resume()
    taken = take(client, "ex-lock", count=2)
    assert [t.id for t in taken] == [waiter]
    assert [e["id"] for e in q.expired()] == [head]


def test_a_delayed_task_expires_at_its_time_and_an_absolute_expiry_works(client):
    """A delayed task past its aware-datetime expiry, promoted later, ends expired; its unique key is free again."""
    q = Queue("ex-abs")
    soon = datetime.now(UTC) + timedelta(seconds=0.3)
    task_id = q.enqueue("d", delay=0.1, expires=soon, unique="K")
    assert q.enqueue("d2", unique="K") == task_id  # held while it lives
    time.sleep(0.5)
    assert take(client, "ex-abs") == []
    assert [e["id"] for e in q.expired()] == [task_id]
    assert q.enqueue("d3", unique="K") != task_id


def test_the_handlers_expires_is_the_default(client):
    """@handler(expires=) applies to a plain enqueue of its queue."""
    from queues.engine import registry

    registry.handler("ex-default", expires=0.2)(lambda task: None)
    try:
        q = Queue("ex-default")
        q.pause()
        task_id = q.enqueue("plain")
        time.sleep(0.4)
        q.resume()
        assert take(client, "ex-default") == []
        assert [e["id"] for e in q.expired()] == [task_id]
    finally:
        registry._handlers.pop("ex-default", None)


def test_throttle_adds_one_task_per_window(client):
    """Within the window every enqueue with the key returns the first id and adds nothing; after it, a new one."""
    q = Queue("th")
    first = q.enqueue("a", throttle=("user-1", 0.5))
    assert q.enqueue("b", throttle=("user-1", 0.5)) == first
    other = q.enqueue("c", throttle=("user-2", 0.5))
    assert other != first
    assert q.counts()["enqueued"] == 2
    time.sleep(0.6)
    again = q.enqueue("d", throttle=("user-1", 0.5))
    assert again not in (first, other)
    assert q.get(first).payload == "a"


def test_debounce_keeps_one_task_with_the_last_payload_and_due_time(client):
    """Three enqueues inside the quiet period: one task, the last payload, due a period after the last."""
    q = Queue("db")
    first = q.enqueue("v1", debounce=("doc-7", 30))
    due_first = q.get(first).due_at
    time.sleep(0.05)
    assert q.enqueue(b"v2" * 40, debounce=("doc-7", 30)) == first
    assert q.enqueue("v3" * 100, debounce=("doc-7", 30)) == first
    task = q.get(first)
    assert task.payload == "v3" * 100 and task.state == "delayed" and task.due_at > due_first
    assert q.counts()["delayed"] == 1 and q.counts()["enqueued"] == 1
    _flush_delayed(client, "db")
    (taken,) = take(client, "db")
    assert taken.id == first and taken.payload == "v3" * 100
    # started: the next enqueue makes a new task
    assert q.enqueue("v4", debounce=("doc-7", 30)) != first


@pytest.mark.parametrize(
    "options, message",
    [
        ({"expires": 0}, "expires must be more than 0"),
        ({"expires": "soon"}, "expires must be a number of seconds"),
        ({"expires": datetime(2030, 1, 1)}, "aware datetime"),
        ({"expires": 1, "delay": 2}, "later than the delay"),
        ({"throttle": "k"}, r"throttle must be a pair"),
        ({"throttle": ("", 1)}, "throttle's key must be a non-empty string"),
        ({"throttle": ("k", -1)}, "throttle seconds must be more than 0"),
        ({"debounce": ("k", 1), "delay": 1}, "without delay or eta"),
        ({"debounce": ("k", 1), "throttle": ("k", 1)}, "not both"),
        ({"debounce": ("k", 5), "expires": 2}, "longer than the debounce"),
    ],
)
def test_bad_controls_are_refused_before_anything_is_written(client, options, message):
    """Each bad option raises InvalidTask naming it; Redis holds nothing of the queue."""
    with pytest.raises(InvalidTask, match=message):
        Queue("bad-ctl").enqueue("x", **options)
    with pytest.raises(InvalidTask, match="one payload per enqueue"):
        Queue("bad-ctl").enqueue_many(["x", "y"], throttle=("k", 1))
    assert list(client.scan_iter(match="worqr:{bad-ctl}:*")) == []


def test_the_controls_keys_are_in_the_queues_slot(client):
    """throttle:<key>, debounce:<key> and expired are worqr:{<queue>}:<kind>... keys."""
    q = Queue("slot")
    q.enqueue("a", throttle=("t", 5))
    q.enqueue("b", debounce=("d", 5))
    q.pause()
    q.enqueue("c", expires=0.05)
    time.sleep(0.1)
    q.resume()
    register(client, "slot")
    take(client, "slot", count=5, register_first=False)
    present = {k.decode() for k in client.scan_iter(match="worqr:{slot}:*")}
    assert keys.subkey("slot", "throttle", "t") in present
    assert keys.subkey("slot", "debounce", "d") in present
    assert keys.queue_key("slot", "expired") in present
