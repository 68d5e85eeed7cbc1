"""Task controls, through the scripts (no worker process): expiry ends a task that was not
started in time as ``expired``, a throttle's window adds one task, a debounce keeps one task not
started yet with the last payload and due time, a RateLimited holds the queue (or partition);
bad options write nothing."""

import time
from datetime import UTC, datetime, timedelta

import pytest

from queues import Queue, RateLimited
from queues.engine import commands, keys
from queues.engine.codes import Code
from queues.engine.errors import InvalidInput, InvalidTask
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
        ({"throttle": "k"}, r"throttle must be a pair"),
        ({"throttle": ("", 1)}, "throttle's key must be a non-empty string"),
        ({"throttle": ("k", -1)}, "throttle seconds must be more than 0"),
        ({"debounce": ("k", 1), "delay": 1}, "without delay or eta"),
        ({"debounce": ("k", 1), "throttle": ("k", 1)}, "not both"),
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


def _limited(client, task, seconds, hold):
    """Report ``task`` as its handler raising RateLimited(seconds) would (``hold``: 'q' or 'p')."""
    return commands.fail(
        task.queue,
        "w",
        task.id,
        task.lease,
        "RateLimited: 429",
        "",
        retries=3,
        backoff=1,
        backoff_max=10,
        jitter=0,
        history=10,
        retry_after=seconds,
        hold=hold,
    ).run(client)


def test_rate_limited_holds_the_queue_and_puts_the_task_back_first(client):
    """Nothing starts while held; then the raising task comes first, its attempt count unchanged."""
    q = Queue("rl-q")
    first, second = q.enqueue_many(["a", "b"])
    (task,) = take(client, "rl-q")
    assert task.id == first and task.attempt == 1
    assert _limited(client, task, 0.5, "q") == Code.DEFERRED
    held = q.limits()["held_until"]
    assert held is not None
    assert take(client, "rl-q", count=2, register_first=False) == []
    assert q.counts()["pending"] == 2
    time.sleep(0.6)
    again = take(client, "rl-q", count=2, register_first=False)
    assert [t.id for t in again] == [first, second]
    assert again[0].attempt == 1
    assert q.limits()["held_until"] is None


def test_set_limits_reset_ends_a_hold(client):
    """A queue held for 60 s starts again at once after set_limits(reset=True)."""
    q = Queue("rl-reset")
    q.enqueue("a")
    (task,) = take(client, "rl-reset")
    _limited(client, task, 60, "q")
    assert take(client, "rl-reset", register_first=False) == []
    assert q.set_limits(reset=True)["held_until"] is None
    assert [t.id for t in take(client, "rl-reset", register_first=False)] == [task.id]


def test_rate_limited_in_a_partition_holds_only_that_partition(client):
    """Partition a held: b's tasks still start, a's wait; limits() lists the held partition."""
    from queues.engine import registry

    registry.handler("rl-p", partition=lambda t: t.payload[0])(lambda task: None)
    try:
        q = Queue("rl-p")
        a1 = q.enqueue("a1")
        (task,) = take(client, "rl-p")
        assert task.id == a1
        _limited(client, task, 30, "p")
        a2, b1 = q.enqueue("a2"), q.enqueue("b1")
        assert [t.id for t in take(client, "rl-p", count=3, register_first=False)] == [b1]
        limits = q.limits()
        assert limits["held_until"] is None and list(limits["held_partitions"]) == ["a"]
        q.set_limits(reset=True)
        assert [t.id for t in take(client, "rl-p", count=3, register_first=False)] == [a1, a2]
    finally:
        registry._handlers.pop("rl-p", None)


def test_rate_limited_refuses_a_bad_retry_after():
    """RateLimited(-1) and RateLimited("x") raise InvalidInput naming retry_after."""
    for bad in (-1, "x", True):
        with pytest.raises(InvalidInput, match="retry_after"):
            RateLimited(bad)
