"""Limits driven through the scripts directly (no worker process): concurrency, rate, partitions
served round-robin, overrides, and bad input."""

import os
import subprocess
import sys
import time

import pytest

from queues import Queue
from queues.engine import commands, keys, readmodel
from queues.engine.codes import Code
from queues.engine.errors import ConfigurationError, InvalidInput, InvalidTask
from queues.engine.limits import parse_rate
from queues.engine.registry import handler
from tests.conftest import ROOT
from tests.engine_calls import finish
from tests.support.limits import WORKER, customer, noop, register, start


def _bad_partition(task):
    if task.payload == "boom":
        raise ValueError("no customer")
    if task.payload == "int":
        return 7
    return "ok"


handler("lim-part", partition=customer)(noop)
handler("lim-pc", partition=customer, partition_concurrency=1)(noop)
handler("lim-pr", partition=customer, partition_rate=(2, 60))(noop)
handler("lim-badpart", partition=_bad_partition, partition_concurrency=1)(noop)


def test_concurrency_caps_starts_and_a_freed_slot_wakes_an_idle_worker(client):
    """concurrency=2: a start takes at most 2; finishing one frees its slot and wakes an idle worker."""
    q = Queue("lim-c")
    register(client, "lim-c", concurrency=2)
    register(client, "lim-c", worker="w2", concurrency=2)
    q.enqueue_many([str(i) for i in range(5)])
    got = start(client, "lim-c", 5)
    assert len(got.tasks) == 2 and got.due_in_ms == -1
    assert start(client, "lim-c", 5, worker="w2").tasks == []  # held back: w2 goes idle
    assert client.sismember(keys.queue_key("lim-c", "idle"), "w2")
    assert client.llen(keys.queue_key("lim-c", "pending")) == 3  # held-back tasks stay listed
    idle = {m.decode() for m in client.smembers(keys.queue_key("lim-c", "idle"))}
    p = client.pubsub()
    p.subscribe(*(keys.worker_channel(w) for w in sorted(idle)))
    for _ in idle:
        assert p.get_message(timeout=5)["type"] == "subscribe"
    finish(client, got.tasks[0])
    msg = p.get_message(timeout=5)  # one idle worker (either: both asked for more) is woken
    assert msg and msg["data"] == b"w lim-c"
    p.close()
    woken = msg["channel"].decode().rsplit(":", 1)[1]
    assert len(start(client, "lim-c", 5, worker=woken).tasks) == 1
    limits = q.limits()
    assert limits["concurrency"] == 2 and limits["active"] == 2 and limits["held_back"] == 2
    assert limits["handler"]["concurrency"] == 2 and limits["overrides"] == {}


def test_rate_is_a_sliding_window_by_redis_time(client):
    """rate=(3, 0.4): 3 starts, then none until the oldest leaves the window and its start grace (the due time given)."""
    q = Queue("lim-r")
    register(client, "lim-r", rate=(3, 0.4))
    q.enqueue_many([str(i) for i in range(10)])
    first = start(client, "lim-r", 10)
    assert len(first.tasks) == 3
    held = start(client, "lim-r", 10)
    # starts are counted over the window and its start grace, 40 ms (limits.START_GRACE_FRACTION)
    assert first.grace_ms == 40 and held.tasks == [] and 0 <= held.due_in_ms <= 440
    assert q.limits()["starts_in_window"] == 3
    time.sleep(held.due_in_ms / 1000 + 0.02)
    assert len(start(client, "lim-r", 10).tasks) == 3
    # the log never holds more than the window's starts, and expires with it
    assert client.zcard(keys.queue_key("lim-r", "starts")) == 3
    assert 0 < client.pttl(keys.queue_key("lim-r", "starts")) <= 440


def test_a_task_given_back_unstarted_gives_its_start_back(client):
    """rate=(1, 60): a task given back unstarted frees its start for the next take; one stopped after it ran does not."""
    q = Queue("lim-u")
    register(client, "lim-u", partition=customer, rate=(1, 60), partition_rate=(1, 60))
    q.enqueue_many(["A:1", "A:2"])
    first = start(client, "lim-u", 2)
    (task,) = first.tasks
    assert first.grace_ms == 1000  # the start grace of a 60 s window: its handler starts within 1 s of the call
    assert commands.stop("lim-u", WORKER, [(task.id, task.lease, "unstarted")]).run(client) == [Code.REQUEUED]
    (again,) = start(client, "lim-u", 2).tasks  # its start was never counted: the rates let it go
    assert again.id == task.id and again.attempt == 1
    assert commands.stop("lim-u", WORKER, [(again.id, again.lease, False)]).run(client) == [Code.REQUEUED]
    assert start(client, "lim-u", 2).tasks == []  # it ran (a shutdown gave it back): its start counts


@pytest.mark.parametrize("rate", [None, (5, 60)])
def test_a_rate_limited_queue_wakes_its_idle_worker_rather_than_handing_it_a_task(client, rate):
    """With a rate the wake-up carries no task (the worker could not tell when Redis counted that start); without, it does."""
    register(client, "lim-h", **({"rate": rate} if rate else {}))
    assert start(client, "lim-h", 1).tasks == []  # nothing to do: idle
    p = client.pubsub()
    p.subscribe(keys.worker_channel(WORKER))
    assert p.get_message(timeout=5)["type"] == "subscribe"
    Queue("lim-h").enqueue("x")
    message = p.get_message(timeout=5)
    p.close()
    assert message["data"].startswith(b"w " if rate else b"t "), message


def test_partitions_are_served_round_robin(client):
    """1,000 tasks of A then 3 of B: B's come out second, fourth and sixth, not after A's tail."""
    q = Queue("lim-part")
    register(client, "lim-part")
    q.enqueue_many([f"A:{i}" for i in range(1000)])
    q.enqueue_many([f"B:{i}" for i in range(3)])
    assert q.counts()["runnable"] == 1003
    page = [t.payload for t in readmodel.pending(client, "lim-part", 998, 4)]
    assert page == ["A:998", "A:999", "B:0", "B:1"]  # the dashboard's list: partition by partition
    got = start(client, "lim-part", 8).tasks
    assert [t.payload for t in got] == ["A:0", "B:0", "A:1", "B:1", "A:2", "B:2", "A:3", "A:4"]
    assert q.counts()["runnable"] == 995
    one = q.enqueue("C:0")  # a single str payload, no options: still listed in its partition
    assert client.lrange(keys.partition_list_key("lim-part", "C"), 0, -1) == [one.encode()]


def test_partition_concurrency_holds_one_partition_back_not_the_others(client):
    """partition_concurrency=1: one active task per customer; a finish lets that customer's next in."""
    q = Queue("lim-pc")
    register(client, "lim-pc", partition=customer, partition_concurrency=1)
    q.enqueue_many(["A:1", "A:2", "A:3", "B:1", "C:1"])
    got = start(client, "lim-pc", 10).tasks
    assert sorted(t.payload for t in got) == ["A:1", "B:1", "C:1"]
    assert start(client, "lim-pc", 10).tasks == []
    assert client.hget(keys.queue_key("lim-pc", "partitions"), "A") == b"b"  # parked, out of the ring
    assert client.llen(keys.queue_key("lim-pc", "ring")) == 0
    finish(client, next(t for t in got if t.payload == "A:1"))
    assert [t.payload for t in start(client, "lim-pc", 10).tasks] == ["A:2"]
    parts = q.limits()["partitions"]
    assert parts["busiest"][0]["active"] == 1 and parts["listed"] == 1


def test_partition_rate_parks_the_partition_until_its_window_opens(client):
    """partition_rate=(2, 60): two starts per customer, the rest wait with the window's due time."""
    q = Queue("lim-pr")
    register(client, "lim-pr", partition=customer, partition_rate=(2, 60))
    q.enqueue_many(["A:1", "A:2", "A:3", "B:1"])
    got = start(client, "lim-pr", 10)
    assert sorted(t.payload for t in got.tasks) == ["A:1", "A:2", "B:1"]
    again = start(client, "lim-pr", 10)
    assert again.tasks == [] and 60_000 < again.due_in_ms <= 61_000  # the window and its 1 s start grace
    assert client.zscore(keys.queue_key("lim-pr", "pwait"), "A") is not None
    Queue("lim-pr").set_limits(partition_rate=None)  # lifted: A is looked at again at once
    assert [t.payload for t in start(client, "lim-pr", 10).tasks] == ["A:3"]


@pytest.mark.parametrize("raised", [2, None])
def test_raising_partition_concurrency_unparks_partitions(client, raised):
    """A partition parked at partition_concurrency=1 runs its next task once set_limits raises or lifts it."""
    q = Queue("lim-pc")
    register(client, "lim-pc", partition=customer, partition_concurrency=1)
    register(client, "lim-pc", worker="w2", partition=customer, partition_concurrency=1)
    q.enqueue_many(["A:1", "A:2", "A:3", "B:1"])
    assert sorted(t.payload for t in start(client, "lim-pc", 10).tasks) == ["A:1", "B:1"]
    assert start(client, "lim-pc", 10, worker="w2").tasks == []  # A parked, w2 idle
    assert client.hget(keys.queue_key("lim-pc", "partitions"), "A") == b"b"
    p = client.pubsub()
    p.subscribe(keys.worker_channel(WORKER), keys.worker_channel("w2"))  # both asked for more: both idle
    for _ in range(2):
        assert p.get_message(timeout=5)["type"] == "subscribe"
    q.set_limits(partition_concurrency=raised)
    msg = p.get_message(timeout=5)  # an idle worker is told there is work
    p.close()
    assert msg and msg["data"] == b"w lim-pc"
    woken = msg["channel"].decode().rsplit(":", 1)[1]
    expected = ["A:2"] if raised == 2 else ["A:2", "A:3"]
    assert [t.payload for t in start(client, "lim-pc", 10, worker=woken).tasks] == expected


def test_a_deploy_raising_partition_concurrency_unparks_partitions(client):
    """A worker registering with a higher partition_concurrency lets parked partitions run at once."""
    q = Queue("lim-pc")
    register(client, "lim-pc", partition=customer, partition_concurrency=1)
    q.enqueue_many(["A:1", "A:2"])
    assert [t.payload for t in start(client, "lim-pc", 10).tasks] == ["A:1"]
    assert start(client, "lim-pc", 10).tasks == []
    register(client, "lim-pc", worker="w2", partition=customer, partition_concurrency=2)
    assert [t.payload for t in start(client, "lim-pc", 10, worker="w2").tasks] == ["A:2"]


def test_set_limits_overrides_durably_and_reset_goes_back(client):
    """set_limits overrides the handler's values at once; reset=True brings them back."""
    q = Queue("lim-set")
    register(client, "lim-set", concurrency=1)
    q.enqueue_many([str(i) for i in range(6)])
    assert len(start(client, "lim-set", 6).tasks) == 1
    out = q.set_limits(concurrency=3, rate="100/m")
    assert out["concurrency"] == 3 and out["rate"] == [100, 60.0] and out["overrides"]["concurrency"] == 3
    assert len(start(client, "lim-set", 6).tasks) == 2
    assert q.set_limits(concurrency=None)["concurrency"] is None
    assert len(start(client, "lim-set", 6).tasks) == 3
    back = q.set_limits(reset=True)
    assert back["concurrency"] == 1 and back["rate"] is None and back["overrides"] == {}
    both = q.set_limits(rate=(5, 1))
    both = q.set_limits(reset=True, concurrency=2)  # reset first, then set
    assert both["concurrency"] == 2 and both["rate"] is None and both["overrides"] == {"concurrency": 2}
    # a worker registering again keeps an override in force
    q.set_limits(concurrency=5)
    register(client, "lim-set", concurrency=1)
    assert q.limits()["concurrency"] == 5


def test_a_dead_workers_slots_come_back(client):
    """Failing a dead worker puts its tasks back and frees their slots for the others."""
    q = Queue("lim-dead")
    register(client, "lim-dead", concurrency=2)
    register(client, "lim-dead", worker="w2", concurrency=2)
    q.enqueue_many(["1", "2", "3"])
    assert len(start(client, "lim-dead", 3).tasks) == 2
    assert start(client, "lim-dead", 3, worker="w2").tasks == []
    assert commands.unregister("lim-dead", WORKER, "worker_failed").run(client) == 2
    assert len(start(client, "lim-dead", 3, worker="w2").tasks) == 2


def test_limits_hold_for_tasks_handed_to_idle_workers_at_enqueue(client):
    """Enqueue hands tasks to idle workers only as far as the limits allow."""
    q = Queue("lim-hand")
    register(client, "lim-hand", concurrency=1)
    register(client, "lim-hand", worker="w2", concurrency=1)
    assert start(client, "lim-hand", 2).status == Code.OK
    assert start(client, "lim-hand", 2, worker="w2").status == Code.OK  # both idle now
    q.enqueue_many(["1", "2", "3"])
    assert q.limits()["active"] == 1 and q.counts()["runnable"] == 2


def test_a_limited_queue_without_limits_data_costs_nothing(client):
    """An unlimited queue keeps no limits keys; a limited one keeps only its settings and logs."""
    q = Queue("lim-none")
    register(client, "lim-none")
    q.enqueue("x")
    start(client, "lim-none", 1)
    for kind in ("limits", "starts", "partitions", "ring", "pactive", "pwait"):
        assert not client.exists(keys.queue_key("lim-none", kind)), kind


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be an integer"),
        ({"concurrency": 1.5}, "concurrency must be an integer"),
        ({"concurrency": True}, "concurrency must be an integer"),
        ({"rate": "10/d"}, "rate must be"),
        ({"rate": (0, 60)}, "rate must allow"),
        ({"rate": (10, 0)}, "window must be"),
        ({"rate": (10,)}, "rate must be"),
        ({"partition_concurrency": 1}, "partition_concurrency needs partition="),
        ({"partition_rate": "1/s"}, "partition_rate needs partition="),
        ({"partition": "customer"}, "partition must be a function"),
    ],
)
def test_bad_handler_options_name_the_queue_and_option(options, message):
    """A bad limit option of a handler raises ConfigurationError naming the queue and the option."""
    with pytest.raises(ConfigurationError, match=message) as exc:
        handler("lim-bad", **options)(noop)
    assert "'lim-bad'" in str(exc.value)


def test_rate_strings():
    """'100/m', '10/s' and '500/h' are rates; (N, seconds) too."""
    assert parse_rate("q", "rate", "100/m").window_ms == 60_000
    assert parse_rate("q", "rate", "10/s").starts == 10
    assert parse_rate("q", "rate", "500/h").window_ms == 3_600_000
    assert parse_rate("q", "rate", (5, 2)).window_ms == 2000


def test_a_bad_partition_key_refuses_the_enqueue_and_writes_nothing(client):
    """A partition function that raises or returns a non-string: InvalidTask naming the queue, nothing written."""
    q = Queue("lim-badpart")
    for payload in ("boom", "int"):
        with pytest.raises(InvalidTask, match="'lim-badpart'.*partition function"):
            q.enqueue(payload)
        with pytest.raises(InvalidTask):
            q.enqueue_many(["fine", payload])
    assert client.dbsize() == 0


def test_bad_set_limits_input_changes_nothing(client):
    """set_limits refuses bad values, naming the queue and option, and writes nothing."""
    q = Queue("lim-badset")
    for kwargs in ({"concurrency": 0}, {"rate": "fast"}, {"reset": True, "concurrency": 2.5}, {}, {"reset": "yes"}):
        with pytest.raises(InvalidInput, match="lim-badset"):
            q.set_limits(**kwargs)
    assert client.dbsize() == 0


def test_the_system_check_reports_bad_handler_options():
    """A bad @handler option met at start-up is a system check error (queues.E030) naming queue and option."""
    from queues import checks

    try:
        handler("lim-check", concurrency=0)(noop)
    except ConfigurationError as exc:
        checks.HANDLER_ERRORS.append(exc)
    try:
        errors = checks.check_handlers(None)
    finally:
        checks.HANDLER_ERRORS.clear()
    assert [e.id for e in errors] == ["queues.E030"]
    assert "'lim-check'" in errors[0].msg and "concurrency" in errors[0].msg


def test_limits_combine_with_delays_retries_pause_and_locks(client):
    """Delayed and retried tasks of a partition wait for its slot; pause stops all; a lock still holds."""
    from tests.engine_calls import fail

    q = Queue("lim-pc")
    register(client, "lim-pc", partition=customer, partition_concurrency=1)
    first = q.enqueue("A:1")
    q.enqueue("A:2", delay=0.05)
    q.enqueue("B:1", lock="L")
    q.enqueue("C:1", lock="L")
    time.sleep(0.1)  # A:2 is due
    got = start(client, "lim-pc", 10).tasks
    assert sorted(t.payload for t in got) == ["A:1", "B:1"]  # A:2 held by A's slot, C:1 by the lock
    a1 = next(t for t in got if t.id == first)
    assert fail(client, a1, retries=1) == Code.RETRYING  # A:1 retries after its backoff (1 s)
    assert [t.payload for t in start(client, "lim-pc", 10).tasks] == ["A:2"]
    q.pause()
    assert start(client, "lim-pc", 10).status == Code.PAUSED
    q.resume()
    finish(client, next(t for t in got if t.payload == "B:1"))
    assert [t.payload for t in start(client, "lim-pc", 10).tasks] == ["C:1"]  # the lock's turn came


def test_a_schedules_runs_go_to_the_partition_of_its_payload(client):
    """A schedule on a partitioned queue lists its runs in the partition its payload gives."""
    from queues.engine import schedules
    from queues.engine.schedule_settings import parse

    schedules.sync(client, [parse("lim-sched", {"queue": "lim-pc", "every": 3600, "payload": "S:1"})])
    task_id = schedules.trigger(client, "lim-sched")
    assert client.lrange(keys.partition_list_key("lim-pc", "S"), 0, -1) == [task_id.encode()]
    register(client, "lim-pc", partition=customer, partition_concurrency=1)
    assert [t.id for t in start(client, "lim-pc", 5).tasks] == [task_id]


@pytest.mark.parametrize("command", [["check"], ["worker", "emails"]])
def test_a_bad_handler_option_stops_manage_py_at_start_up(client, command):
    """manage.py check / worker with @handler("emails", concurrency=0) exits non-zero with queues.E030."""
    # a real start-up: the tasks module is imported by the app registry (tests/badhandlerapp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings_badhandler"
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # a worker that started despite the bad option would serve until then
    )
    assert out.returncode != 0, out.stdout + out.stderr
    assert "queues.E030" in out.stderr and "'emails'" in out.stderr and "concurrency" in out.stderr, out.stderr
    assert client.dbsize() == 0  # nothing written: no worker registered, no limits


def _finish_kept(client, task):
    return commands.finish(task.queue, WORKER, [(task.id, task.lease, "", True)], result_ttl=60).run(client)[0]


def test_a_kept_slot_holds_until_released_even_across_a_drop(client):
    """finish with keep holds a concurrency=1 slot until release, a drop included; an unlimited queue keeps none."""
    q = Queue("lim-kept")
    register(client, "lim-kept", concurrency=1)
    q.enqueue_many(["1", "2"])
    (first,) = start(client, "lim-kept", 2).tasks
    assert _finish_kept(client, first) == Code.COMPLETED
    assert start(client, "lim-kept", 2).tasks == []  # the thread still runs: its slot is kept
    assert q.limits()["active"] == 1 and q.limits()["kept"] == 1
    commands.release("lim-kept", WORKER, [(f"lim-kept-{os.urandom(8).hex()}", "1")]).run(
        client
    )  # nothing kept: ignored
    assert q.limits()["kept"] == 1
    commands.release("lim-kept", WORKER, [(first.id, str(first.lease))]).run(client)
    (second,) = start(client, "lim-kept", 2).tasks
    assert _finish_kept(client, second) == Code.COMPLETED and q.limits()["kept"] == 1
    while commands.drop("lim-kept", 100).run(client):
        pass
    # The handler still runs and its worker serves the queue still: the drop keeps its slot.
    assert q.limits()["kept"] == 1 and q.limits()["concurrency"] == 1
    q.enqueue("3")
    assert start(client, "lim-kept", 2).tasks == []
    commands.release("lim-kept", WORKER, [(second.id, str(second.lease))]).run(client)
    assert not client.exists(keys.queue_key("lim-kept", "kept"))
    assert not client.exists(keys.held_locks_key("lim-kept", WORKER))
    assert [t.payload for t in start(client, "lim-kept", 2).tasks] == ["3"]

    free = Queue("lim-none")
    register(client, "lim-none")
    free.enqueue("x")
    (task,) = start(client, "lim-none", 1).tasks
    assert _finish_kept(client, task) == Code.COMPLETED
    assert not client.exists(keys.queue_key("lim-none", "kept"), keys.held_locks_key("lim-none", WORKER))
