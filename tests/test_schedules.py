"""Schedules in Redis, driven through the engine's calls (no worker process): sync, the fire
script's one-run-per-tick rule, missed ticks, overlap, pause/resume and trigger."""

import json

import pytest

from queues.engine import commands, keys, readmodel, schedules
from queues.engine.codes import Code
from queues.engine.errors import ScheduleNotFound
from queues.engine.queue import Queue, new_task_id
from queues.engine.schedule_settings import parse
from queues.engine.ticks import next_after
from tests.engine_calls import finish, take


def spec(name, **raw):
    raw.setdefault("queue", "sq")
    if "cron" not in raw:
        raw.setdefault("every", 10)
    return parse(name, raw)


def fire(client, name, due=None, mode="tick", after=None):
    s = schedules.get(client, name)
    due = int(s.next_run.timestamp() * 1000) if due is None else due
    after = next_after(s.timing, due) if after is None else after
    kind = "catchup" if mode == "missed" else "tick"
    return commands.fire(
        s.queue,
        name,
        s.version,
        due,
        after,
        mode=mode,
        grace_ms=schedules.MISSED_GRACE_MS,
        task_id=new_task_id(s.queue),
        meta=schedules.run_meta(name, due, kind),
    ).run(client)


HOUR_MS = 3_600_000


def just_due(client):
    """A tick that passed half a second ago by Redis's clock, and the tick after it, an hour on.
    The fire script answers MISSED once the tick after is due too: with every=1 a test taking
    a second (a loaded machine) saw MISSED instead of OK, so the tests fire hourly schedules."""
    due = readmodel.server_ms(client) - 500
    return due, due + HOUR_MS


def set_next(client, queue, name, ms):
    """Move a schedule's next run (as if it were due then): the test's stand-in for waiting."""
    client.zadd(keys.queue_key(queue, "schedules"), {name: ms})


def test_sync_creates_changes_and_removes(client):
    """Sync adds new schedules, moves changed ones (pause and last run kept) and removes the others."""
    done = schedules.sync(client, [spec("a", every=60), spec("b", cron="0 3 * * *", payload="p")])
    assert sorted(done["created"]) == ["a", "b"]
    a = schedules.get(client, "a")
    now = readmodel.server_ms(client)
    assert a.queue == "sq" and a.every == 60 and not a.paused
    assert 0 < a.next_run.timestamp() * 1000 - now <= 60_000
    assert schedules.get(client, "b").payload == "p" and schedules.get(client, "b").cron == "0 3 * * *"
    due, after = just_due(client)  # a run of b's (as if its tick were now), and one by hand
    set_next(client, "sq", "b", due)
    assert fire(client, "b", due, after=after).code == Code.OK
    schedules.trigger(client, "b")
    schedules.pause(client, "b")
    ran = schedules.get(client, "b")
    done = schedules.sync(client, [spec("a", every=60), spec("b", cron="0 4 * * *", payload="p")])
    assert done == {"created": [], "changed": ["b"], "removed": []}
    b = schedules.get(client, "b")
    assert b.cron == "0 4 * * *" and b.paused and b.next_run is None  # the pause survives a change
    kept = ("last_run", "last_task_id", "last_kind", "last_tick", "runs", "triggered", "lateness")
    assert {k: getattr(b, k) for k in kept} == {k: getattr(ran, k) for k in kept}  # and the last-run data
    assert b.runs == 1 and b.triggered == 1 and b.last_kind == "trigger"
    done = schedules.sync(client, [spec("b", cron="0 4 * * *", payload="p")])
    assert done["removed"] == ["a"] and schedules.get(client, "a") is None
    assert [s.name for s in schedules.all(client)] == ["b"]
    assert not client.exists(keys.schedule_key("sq", "a"))


def test_a_schedule_moved_to_another_queue_keeps_its_pause_and_fires_in_one_place(client):
    """Moved between queues it lives in the new queue only, still paused."""
    schedules.sync(client, [spec("m", queue="sq")])
    schedules.pause(client, "m")
    schedules.sync(client, [spec("m", queue="other")])
    m = schedules.get(client, "m")
    assert m.queue == "other" and m.paused
    assert client.zcard(keys.queue_key("sq", "schedules")) == 0


def test_one_run_per_tick_whoever_calls(client):
    """The first call for a tick enqueues the run and moves on; a second (another worker) is STALE."""
    schedules.sync(client, [spec("t", every=3600, payload="tick")])
    due, after = just_due(client)
    set_next(client, "sq", "t", due)
    first = fire(client, "t", due, after=after)
    second = fire(client, "t", due, after=after)
    assert first.code == Code.OK and first.next_ms == after and first.late_ms >= 0
    assert second.code == Code.STALE and second.next_ms == after
    task = Queue("sq").get(first.task_id)
    assert task.payload == "tick" and json.loads(task.meta) == {"schedule": "t", "tick": due, "kind": "tick"}
    assert Queue("sq").counts()["pending"] == 1
    s = schedules.get(client, "t")
    assert s.last_task_id == first.task_id and s.runs == 1 and s.lateness["count"] == 1
    assert int(s.last_tick.timestamp() * 1000) == due


def test_a_tick_not_yet_due_by_redis_clock_is_not_fired(client):
    """A caller whose clock runs ahead gets EARLY and nothing is enqueued."""
    schedules.sync(client, [spec("e", every=60)])
    reply = fire(client, "e")
    assert reply.code == Code.EARLY and Queue("sq").counts()["enqueued"] == 0


@pytest.mark.parametrize("policy, runs", [("skip", 0), ("once", 1)])
def test_missed_ticks_after_an_outage(client, policy, runs):
    """Ticks missed during an outage."""
    # 'skip' enqueues nothing, 'once' one catch-up run; either way the schedule moves to the first tick after now.
    schedules.sync(client, [spec("o", every=1, missed=policy)])
    now = readmodel.server_ms(client)
    stale = now - now % 1000 - 5000  # five ticks ago
    set_next(client, "sq", "o", stale)
    reply = fire(client, "o", stale)
    assert reply.code == Code.MISSED and Queue("sq").counts()["enqueued"] == 0
    after = next_after(schedules.get(client, "o").timing, reply.now_ms)
    reply = fire(client, "o", stale, mode="missed", after=after)
    assert reply.code == (Code.OK if runs else Code.SKIPPED) and reply.next_ms == after
    assert Queue("sq").counts()["enqueued"] == runs
    assert fire(client, "o", stale, mode="missed", after=after).code == Code.STALE  # once only
    if runs:
        assert json.loads(Queue("sq").get(reply.task_id).meta)["kind"] == "catchup"


def test_overlap_false_skips_while_the_last_run_is_live(client):
    """overlap=False: no run while the last one is pending or running; once it has finished, one."""
    schedules.sync(client, [spec("ov", every=3600, overlap=False)])
    due, after = just_due(client)
    set_next(client, "sq", "ov", due - HOUR_MS)
    assert fire(client, "ov", due - HOUR_MS, mode="missed", after=due).code == Code.SKIPPED  # 'skip'
    set_next(client, "sq", "ov", due)
    first = fire(client, "ov", due, after=after)
    assert first.code == Code.OK
    set_next(client, "sq", "ov", due)  # the same tick again, as if it were the next
    (running,) = take(client, "sq")
    skipped = fire(client, "ov", due, after=after)
    assert skipped.code == Code.SKIPPED and Queue("sq").counts()["enqueued"] == 1
    assert schedules.get(client, "ov").skipped == 1
    finish(client, running)
    set_next(client, "sq", "ov", due)
    assert fire(client, "ov", due, after=after).code == Code.OK


def test_pause_resume_and_trigger(client):
    """Trigger runs now, moving no tick (paused or not); resume picks the next tick; unknown: 404."""
    # Paused: no next run; resume picks the next tick after now. Unknown names raise ScheduleNotFound.
    schedules.sync(client, [spec("p", every=3600, payload="now")])
    before = schedules.get(client, "p").next_run
    active = schedules.trigger(client, "p")  # not paused: runs now, the next tick stays
    p = schedules.get(client, "p")
    assert p.next_run == before and p.last_task_id == active and not p.paused and p.runs == 0
    assert schedules.pause(client, "p") is True and schedules.pause(client, "p") is False
    assert schedules.get(client, "p").next_run is None and schedules.get(client, "p").paused
    task_id = schedules.trigger(client, "p")
    task = Queue("sq").get(task_id)
    assert task.payload == "now" and json.loads(task.meta)["kind"] == "trigger"
    p = schedules.get(client, "p")
    assert p.last_task_id == task_id and p.triggered == 2
    assert p.paused and p.next_run is None  # a trigger while paused leaves it paused
    assert schedules.resume(client, "p") is True and schedules.resume(client, "p") is False
    assert schedules.get(client, "p").next_run == before
    for call in (schedules.pause, schedules.resume, schedules.trigger):
        with pytest.raises(ScheduleNotFound):
            call(client, "nope")
    assert schedules.get(client, "nope") is None


def test_disabled_schedules_are_listed_without_a_next_run(client):
    """enabled=False: listed, never due, resume keeps it without a next run; trigger works."""
    schedules.sync(client, [spec("d", every=10, enabled=False)])
    d = schedules.get(client, "d")
    assert d.enabled is False and d.next_run is None and not d.paused
    schedules.pause(client, "d")
    schedules.resume(client, "d")
    assert schedules.get(client, "d").next_run is None
    assert Queue("sq").get(schedules.trigger(client, "d")) is not None


def test_runs_carry_the_enqueue_options_and_take_the_usual_path(client):
    """A run gets the schedule's retries/timeout/backoff/lock/callback, waits on its lock like any task, and ..."""
    # ... counts as enqueued.
    schedules.sync(
        client,
        [spec("opt", every=1, retries=2, timeout=5, backoff=1.5, lock="L", callback="https://hooks.example.com/x")],
    )
    holder = Queue("sq").enqueue("holder", lock="L")
    (held,) = take(client, "sq")
    assert held.id == holder
    task = Queue("sq").get(schedules.trigger(client, "opt"))
    assert (task.retries, task.timeout, task.backoff, task.lock) == (2, 5.0, 1.5, "L")
    assert task.callback == "https://hooks.example.com/x" and task.state == "waiting"
    assert Queue("sq").counts()["enqueued"] == 2
