"""A schedule made at run time, with three real workers running: created every 1 s, updated to
every 2 s, deleted; one run per tick, none after the delete, no restart. The workers' sync of
their settings' schedules leaves it alone."""

import time

from queues.engine import live_schedules, schedules
from tests.conftest import wait_for, wait_registered
from tests.test_schedules_workers import SETTINGS, env_for, now_ms, runs


def test_create_update_delete_with_three_workers(client, workers):
    """Three workers: every 1 s, then 2 s, then deleted: one run per tick, ticks 1 s then 2 s apart, none after the delete."""
    env = env_for({"fixed": {"queue": "sched", "every": 5}})
    started = [workers(["sched"], name=f"live-{i}", settings=SETTINGS, env=env) for i in range(3)]
    for w in started:
        wait_registered(client, w.name)
    live_schedules.create(client, "live", queue="sched", every=1, payload="live")
    created = now_ms(client)
    wait_for(lambda: len(runs(client, "live")) >= 5, timeout=30, message="five runs every second")
    live_schedules.update(client, "live", every=2)
    updated = now_ms(client)
    wait_for(lambda: sum(t > updated for t in runs(client, "live")) >= 4, timeout=40, message="four runs every 2 s")
    live_schedules.delete(client, "live")
    deleted = now_ms(client)
    assert schedules.get(client, "live") is None
    time.sleep(3)  # three ticks' worth of the old settings: none may run
    got = runs(client, "live")
    assert all(len(ids) == 1 for ids in got.values()), {t: ids for t, ids in got.items() if len(ids) > 1}
    assert all(created - 1000 <= t <= deleted for t in got)  # none before the create, none after the delete
    before = sorted(t for t in got if t <= updated)
    after = sorted(t for t in got if t > updated)
    assert len(before) >= 5 and all(b - a == 1000 for a, b in zip(before, before[1:]))
    assert len(after) >= 4 and all(b - a == 2000 for a, b in zip(after, after[1:]))
    assert schedules.get(client, "fixed") is not None  # the settings' schedule is still there
