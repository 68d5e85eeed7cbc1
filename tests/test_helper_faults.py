"""A worker's helpers (heartbeat, scheduler, outbox relay) failing on an unexpected error, by fault
injection (``WORQR_FAULT``, ``queues.engine.faults``): the failure is logged with its traceback
and the helper is started again, so its job still gets done."""

import json
import re
import signal
import time

import pytest

from queues import outbox
from queues.engine import Queue, keys, readmodel
from queues.engine.queue import new_task_id
from tests.conftest import records, wait_for, wait_registered

pytestmark = pytest.mark.django_db(transaction=True)

FAULTS = "heartbeat-raise,scheduler-raise,relay-raise"


def test_helpers_that_fail_unexpectedly_are_logged_and_started_again(client, workers):
    """Heartbeat, scheduler and relay each raise once."""
    # the log shows each traceback, and the worker keeps beating, fires its schedule and pushes an outbox row
    # afterwards.
    env = {
        "WORQR_FAULT": FAULTS,
        "WORQR_TEST_SCHEDULES": json.dumps({"beat": {"queue": "sched", "every": 1, "payload": "beat"}}),
    }
    w = workers(["sched", "t1"], name="faulty", settings="tests.settings_schedules", env=env)
    wait_registered(client, "faulty")
    lines = {
        "heartbeat": r"worker faulty: its heartbeat failed; starting it again in 1\.0 s",
        "scheduler": r"worker faulty: its scheduler failed; starting it again in 1\.0 s",
        "relay": r"worqr outbox relay: failed; trying again in 1\.0 s",
    }
    wait_for(lambda: all(re.search(p, w.output()) for p in lines.values()), timeout=20, message=lambda: w.output())
    out = w.output()
    for helper, pattern in lines.items():
        after = out[re.search(pattern, out).end() :]
        assert after.lstrip().startswith("Traceback"), (helper, after[:300])
        assert "InjectedFault: fault injected at " + helper in after, helper
    failed_at = time.monotonic()

    # The outbox relay: a row left behind after its failure is pushed and runs.
    q = Queue("t1")
    (task_id,) = ids = [new_task_id("t1")]
    outbox.store("default", "t1", outbox.entries(q, ["left"], ids, {}))
    wait_for(lambda: [r["id"] for r in records(client, "t1")] == [task_id], timeout=15, message="the row's task")
    # The scheduler: ticks are fired after its failure.
    wait_for(lambda: [r for r in records(client, "sched") if r["payload"] == "beat"], timeout=15, message="a tick")
    # The heartbeat: still beating past its TTL (3 s) after it failed, so the worker is not reaped.
    wait_for(lambda: time.monotonic() > failed_at + 4, timeout=10)
    assert client.pttl(keys.heartbeat_key("faulty")) > 0
    assert any(x["name"] == "faulty" for x in readmodel.workers(client))
    assert w.proc.poll() is None


def test_the_one_backoff_doubles_to_its_cap_and_stops_short_of_a_deadline():
    """Backoff: delays double up to the cap, start over after reset, and never sleep past a deadline."""
    from queues.engine.backoff import Backoff

    restarts = Backoff(1.0, 30.0, immediate=True)  # the supervisor's: at once, then 1 s doubling to 30 s
    assert [restarts.next() for _ in range(8)] == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    restarts.reset()
    assert restarts.next() == 0.0
    retries = Backoff(0.05, 0.5)  # an enqueue's
    start = time.monotonic()
    assert retries.sleep(start + 5) and retries.sleep(start + 5)  # 50 ms, then 100 ms
    assert time.monotonic() - start >= 0.15
    before = time.monotonic()
    assert not retries.sleep(before + 0.1)  # the next pause (200 ms) would end after the deadline
    assert time.monotonic() - before < 0.05 and retries.delay == 0.2


def test_a_helper_that_swallows_its_cancel_is_named_and_the_stop_goes_on(client, workers):
    """The linker swallows its cancel (WORQR_FAULT=linker-deaf): SIGTERM still ends the worker."""
    # after the 5 s it gives its helpers, and it names the one that held it up (what
    # test_worker_crash's many stops look for).
    w = workers(["t1"], name="deaf", grace=0, env={"WORQR_FAULT": "linker-deaf"})
    wait_for(lambda: "fault injected at linker-deaf" in w.output(), timeout=20, message=lambda: w.output())
    t0 = time.monotonic()
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0
    took = time.monotonic() - t0
    assert "worqr: worker deaf: linker did not end within 5 s of its cancel" in w.output()
    assert took >= 5, f"the worker exited {took:.1f} s after SIGTERM, before its helpers' 5 s were up"
