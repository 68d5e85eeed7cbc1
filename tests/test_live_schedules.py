"""Schedules made at run time: bad settings refused with nothing written, a settings' schedule
not changed or deleted here, a worker's sync leaving live ones alone (also those made while it
runs), and the Python API."""

import threading

import pytest

from queues import schedules as api
from queues.engine import keys, live_schedules, schedules
from queues.engine.errors import InvalidSchedule, ScheduleNotFound
from queues.engine.schedule_settings import parse_all


def test_bad_settings_are_refused_and_nothing_is_written(client):
    """Each bad setting raises InvalidSchedule naming its key, and nothing is written."""
    for settings, key in (
        ({"queue": "ls", "every": 0}, "every"),
        ({"queue": "ls", "every": 1, "cron": "* * * * *"}, "cron"),
        ({"queue": "bad queue", "every": 1}, "queue"),
        ({"queue": "ls", "every": 1, "colour": "red"}, "colour"),
        ({"queue": "ls", "cron": "61 * * * *"}, "cron"),
    ):
        with pytest.raises(InvalidSchedule) as err:
            live_schedules.create(client, "ls-1", **settings)
        assert err.value.field == key
    with pytest.raises(InvalidSchedule):
        live_schedules.create(client, "bad name!", queue="ls", every=1)
    assert not client.exists(keys.SCHEDULES, keys.LIVE_SCHEDULES)


def test_update_and_delete_of_live_and_settings_schedules(client):
    """Live schedules change (queue, timing) and go; settings' ones are refused; a sync keeps live ones and takes over a declared name."""
    schedules.sync(client, parse_all({"declared": {"queue": "ls", "every": 60}}))
    live_schedules.create(client, "mine", queue="ls", every=60, payload="p", retries=2)
    with pytest.raises(InvalidSchedule, match="exists already"):
        live_schedules.create(client, "declared", queue="ls", every=5)
    with pytest.raises(InvalidSchedule, match="declared in settings"):
        live_schedules.update(client, "declared", every=5)
    with pytest.raises(InvalidSchedule, match="declared in settings"):
        live_schedules.delete(client, "declared")
    with pytest.raises(ScheduleNotFound):
        live_schedules.delete(client, "nobody")
    live_schedules.update(client, "mine", cron="0 3 * * *", queue="ls2")
    s = schedules.get(client, "mine")
    assert (s.queue, s.cron, s.every, s.payload, s.options) == ("ls2", "0 3 * * *", None, "p", {"retries": 2})
    # a worker's sync of its settings keeps the live schedule (in its new queue)
    schedules.sync(client, parse_all({"declared": {"queue": "ls", "every": 30}}))
    assert schedules.get(client, "mine").queue == "ls2"
    assert client.zscore(keys.queue_key("ls", "schedules"), "mine") is None
    live_schedules.delete(client, "mine")
    assert schedules.get(client, "mine") is None and client.zcard(keys.queue_key("ls2", "schedules")) == 0
    # settings declaring a live schedule's name take it over
    live_schedules.create(client, "both", queue="ls", every=60)
    schedules.sync(client, parse_all({"both": {"queue": "ls", "every": 10}}))
    assert schedules.get(client, "both").every == 10 and live_schedules.live_names(client) == {}


def test_syncs_racing_creates_and_moves_lose_no_live_schedule(client):
    """Workers' syncs run without a break while 150 live schedules are made and 50 moved: every one is still there, in its queue."""
    declared = parse_all({"declared": {"queue": "ls", "every": 60}})
    stop, syncs = threading.Event(), []

    def sync_on():
        while not stop.is_set():
            schedules.sync(client, declared)
            syncs.append(1)

    syncers = [threading.Thread(target=sync_on) for _ in range(2)]
    for t in syncers:
        t.start()
    try:
        for i in range(150):
            live_schedules.create(client, f"race-{i}", queue="ls", every=60)
            if i % 3 == 0:
                live_schedules.update(client, f"race-{i}", queue="ls2")
    finally:
        stop.set()
        for t in syncers:
            t.join()
    assert len(syncs) > 50  # the syncs ran all along
    for i in range(150):
        queue = "ls2" if i % 3 == 0 else "ls"
        assert client.zscore(keys.queue_key(queue, "schedules"), f"race-{i}") is not None, (i, queue)
        assert schedules.get(client, f"race-{i}").queue == queue
    assert client.zcard(keys.queue_key("ls", "schedules")) == 101  # 100 + declared: no copy left behind


def test_the_python_api(client):
    """queues.schedules.create/update/delete return and change what Redis has."""
    made = api.create("py", queue="ls", every=30, payload="x")
    assert made.name == "py" and made.every == 30 and made.next_run is not None
    assert api.update("py", every=45).every == 45
    api.delete("py")
    assert api.get("py") is None
