"""Schedules fired by real worker processes: one task per tick with three workers and a kill -9,
missed ticks after all workers stopped, overlap=False with a slow handler, pause across a
restart and a changed setting, trigger, and a worker refusing bad settings."""

import json
import os
import signal
import subprocess
import sys
from collections import defaultdict

import pytest

from queues.engine import keys, readmodel, schedules
from tests.conftest import ROOT, records, wait_for, wait_registered

SETTINGS = "tests.settings_schedules"


def env_for(declared):
    return {"WORQR_TEST_SCHEDULES": json.dumps(declared)}


def runs(client, name, queue="sched"):
    """{tick ms or None: {task ids}} of the runs of schedule ``name`` that handlers recorded."""
    out = defaultdict(set)
    for r in records(client, queue):
        meta = json.loads(r["meta"]) if r.get("meta") else {}
        if meta.get("schedule") == name:
            out[meta["tick"]].add(r["id"])
    return out


def kinds(client, name, queue="sched"):
    return [
        json.loads(r["meta"])["kind"]
        for r in records(client, queue)
        if r.get("meta") and json.loads(r["meta"]).get("schedule") == name
    ]


def now_ms(client):
    return readmodel.server_ms(client)


def test_every_second_with_three_workers_and_a_kill_gives_one_task_per_tick(client, workers):
    """every: 1 with three workers for 10 s: 10 ± 1 runs, each tick one task, also across a kill -9."""
    # "tri" (every 3 s) checks that each run is enqueued within 1 s of its tick: for "beat" a run
    # over a second late can't happen (the script answers MISSED once the next tick is due).
    env = env_for({"beat": {"queue": "sched", "every": 1, "payload": "beat"}, "tri": {"queue": "sched", "every": 3}})
    started = [workers(["sched"], name=f"beat-{i}", settings=SETTINGS, env=env) for i in range(3)]
    for w in started:
        wait_registered(client, w.name)
    first = min(wait_for(lambda: runs(client, "beat"), timeout=20, message="the first run"))
    window = range(first + 1000, first + 11_000, 1000)  # the next ten ticks
    wait_for(lambda: now_ms(client) >= first + 5500, timeout=20, message="half-way")
    started[0].kill()  # kill -9 mid-way
    wait_for(lambda: now_ms(client) >= window[-1] + 200, timeout=30, message="the tenth tick")
    wait_for(
        lambda: sum(t in runs(client, "beat") for t in window) >= 9,
        timeout=20,
        message="the runs of the window (a run handed to the killed worker waits for the reaper)",
    )
    got = runs(client, "beat")
    assert 9 <= sum(t in got for t in window) <= 10
    assert all(len(ids) == 1 for ids in got.values()), {t: ids for t, ids in got.items() if len(ids) > 1}
    beat, tri = schedules.get(client, "beat"), schedules.get(client, "tri")
    enqueued = client.hget(keys.queue_key("sched", "stats"), "enqueued")
    assert int(enqueued) == beat.runs + tri.runs  # no task outside the schedules' counts
    # lateness: the fire script's histogram of enqueue time (Redis clock) minus the tick
    for s in (beat, tri):
        within_1s = dict(s.lateness["buckets"])["1"]
        assert s.lateness["count"] == s.runs and within_1s == s.runs, f"{s.name}: late runs {s.lateness}"
    assert tri.runs >= 2


def test_missed_ticks_after_all_workers_stopped(client, workers):
    """All workers stopped for 5 ticks, then started: 'skip' gives no catch-up run, 'once' one."""
    declared = {"skip-it": {"queue": "sched", "every": 1}, "once-it": {"queue": "sched", "every": 1, "missed": "once"}}
    first = workers(["sched"], name="miss-1", settings=SETTINGS, env=env_for(declared))
    wait_for(lambda: runs(client, "skip-it") and runs(client, "once-it"), timeout=20, message="a run of each")
    first.signal(signal.SIGTERM)
    assert first.wait(timeout=20) == 0
    stopped_at = now_ms(client)
    wait_for(lambda: now_ms(client) >= stopped_at + 5500, timeout=10, message="five ticks to pass")
    workers(["sched"], name="miss-2", settings=SETTINGS, env=env_for(declared))
    restarted_at = wait_for(
        lambda: now_ms(client) if kinds(client, "once-it").count("catchup") else None,
        timeout=20,
        message="the catch-up run of 'once'",
    )
    wait_for(
        lambda: max(runs(client, "skip-it")) > restarted_at and max(runs(client, "once-it")) > restarted_at,
        timeout=20,
        message="a regular run of each after the restart",
    )
    assert kinds(client, "once-it").count("catchup") == 1
    assert "catchup" not in kinds(client, "skip-it")
    # 'skip': no run for any tick of the outage.
    assert not [t for t in runs(client, "skip-it") if stopped_at + 1000 < t < restarted_at - 1000]


def test_overlap_false_with_a_slow_handler_skips_ticks_and_never_stacks(client, workers):
    """A run slower than the interval: the ticks while it runs are skipped, never queued behind it."""
    declared = {"slow": {"queue": "sched", "every": 1, "overlap": False, "payload": '{"sleep": 1.6}'}}
    workers(["sched"], name="slow-1", concurrency=3, settings=SETTINGS, env=env_for(declared))
    wait_for(lambda: len(runs(client, "slow")) >= 3, timeout=30, message="three runs")
    spans = sorted((r["start"], r["end"]) for r in records(client, "sched"))
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:])), spans
    assert schedules.get(client, "slow").skipped >= 2


def test_pause_survives_a_restart_and_a_changed_setting_and_trigger_runs_at_once(client, workers):
    """Paused, it stays paused (last run kept) through a restart with changed settings; trigger runs it."""
    # trigger runs it at once; resume brings its ticks back
    first = workers(
        ["sched"],
        name="pause-1",
        settings=SETTINGS,
        env=env_for({"p": {"queue": "sched", "every": 1, "payload": "v1"}}),
    )
    wait_for(lambda: runs(client, "p"), timeout=20, message="a first run")
    assert schedules.pause(client, "p") is True
    paused_at = now_ms(client)
    first.signal(signal.SIGTERM)
    assert first.wait(timeout=20) == 0
    before = schedules.get(client, "p")
    assert before.runs >= 1 and before.last_task_id and before.last_run
    workers(
        ["sched"],
        name="pause-2",
        settings=SETTINGS,
        env=env_for({"p": {"queue": "sched", "every": 2, "payload": "v2"}}),
    )
    wait_for(lambda: schedules.get(client, "p").every == 2, timeout=20, message="the changed setting synced")
    s = schedules.get(client, "p")
    assert s.paused and s.next_run is None and s.payload == "v2"
    # the last-run data survive the restart and the changed setting too
    assert (s.last_run, s.last_task_id, s.last_tick, s.runs) == (
        before.last_run,
        before.last_task_id,
        before.last_tick,
        before.runs,
    )
    wait_registered(client, "pause-2")
    registered = now_ms(client)
    wait_for(lambda: now_ms(client) > registered + 2500, timeout=10, message="a tick to pass under the new worker")
    triggered = schedules.trigger(client, "p")
    wait_for(
        lambda: any(r["id"] == triggered for r in records(client, "sched")), timeout=5, message="the triggered run"
    )
    assert not [t for t in runs(client, "p") if t is not None and t > paused_at]  # no tick ran while paused
    assert [r["payload"] for r in records(client, "sched") if r["id"] == triggered] == ["v2"]
    schedules.resume(client, "p")
    wait_for(
        lambda: [t for t in runs(client, "p") if t is not None and t > paused_at],
        timeout=10,
        message="a tick after resume",
    )


def test_a_worker_with_a_bad_schedule_refuses_to_start_and_writes_nothing(client):
    """A bad cron: the system check names the schedule and field, the worker exits, Redis is untouched."""
    bad = {"nightly": {"queue": "sched", "cron": "0 25 * * *"}, "ok": {"queue": "sched", "every": 5}}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "worker", "sched"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": SETTINGS, **env_for(bad)},
        timeout=60,
    )
    assert proc.returncode != 0
    assert "queues.E021" in proc.stderr and "'nightly'" in proc.stderr and "'cron'" in proc.stderr
    assert client.keys("*") == []


@pytest.mark.parametrize("options", [[], ["--skip-checks"]], ids=["checked", "checks-skipped"])
def test_a_worker_whose_handler_refuses_a_schedules_payload_refuses_to_start_and_writes_nothing(client, options):
    """A schedule whose payload the handler's lock function fails on: the worker exits, Redis untouched."""
    # bylock's lock is the payload up to ':', so the default payload "" gives no lock key. The
    # system check reports it (queues.E025); without the checks the worker refuses it itself.
    bad = {"locked": {"queue": "bylock", "every": 5}, "ok": {"queue": "sched", "every": 5}}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "worker", "sched", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS, **env_for(bad)},
        timeout=60,
    )
    assert proc.returncode != 0
    assert "'locked'" in proc.stderr and "'lock'" in proc.stderr and "lock function failed" in proc.stderr
    assert ("queues.E025" in proc.stderr) == (not options)
    assert client.keys("*") == []
