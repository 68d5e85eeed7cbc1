"""Stress: one worker at a time, nothing run twice without a crash, under the faults every
production Redis sees: its ordinary connections killed every 0.3-1 s, its pub/sub connections
killed, Redis killed -9 and restarted on its AOF after 0.5-8 s, workers killed -9 or frozen (SIGSTOP); with
locks in play. Each run is logged to a Redis no fault touches (tests/fault_rig.py): no task runs
twice but after a kill -9 or a freeze of the worker running it, no acknowledged task is lost, no
two runs of a lock overlap (but with a frozen holder's, the documented limit), no live worker is
presumed dead. The producer is struck too and sends an enqueue whose reply it lost again by id,
as a caller is told to. ``WORQR_SOAK=1`` runs the long version: at least 2,000
connection kills, 2,000 pub/sub kills, 50 restarts and 20 kill -9."""

import pytest

from tests.fault_rig import Rig
from tests.stress import MARKS, SOAK

pytestmark = MARKS

QUEUES = ["sf", "sfa"]  # a sync handler's queue and an async one's


@pytest.fixture
def rig(workers, client):
    made = []

    def make(**kwargs):
        made.append(Rig(workers, client, QUEUES, **kwargs))
        return made[-1]

    yield make
    for r in made:
        r.close()


def _check(rig, name, findings, tasks=100):
    rig.report(name, findings)
    assert not findings.problems(), "; ".join(findings.problems()) + f" (figures: {findings.summary()})"
    assert findings.acked >= tasks and findings.completed >= findings.acked


def test_connection_kills_reap_no_live_worker_and_run_nothing_twice(rig):
    """Every ordinary connection of three workers killed every 0.3-1 s for 25 s: no worker reaped, nothing run twice."""
    r = rig(seed=3, heartbeat_ttl=2.0)
    r.start({"conn": (0.3, 1.0), "pubsub": (0.3, 1.0)})
    r.run_until(seconds=25)
    findings = r.finish()
    _check(r, "conn", findings)
    assert findings.faults["conn"]["strikes"] >= 15
    assert findings.faults["conn"]["producer's"] >= 5, findings.faults  # the producer is struck too


def test_redis_restarts_of_up_to_8_s_reap_no_worker_and_run_nothing_twice(rig):
    """Redis killed -9 three times and restarted on its AOF 0.5-8 s later: no worker reaped, nothing run twice."""
    r = rig(seed=5)
    # tasks of up to 3 s: some run across each outage, their workers unable to beat
    r.start({"restart": (3.0, 5.0)}, sleep=(0.0, 3.0), rate=8)
    r.run_until(targets={"restart": 3}, limit=120)
    findings = r.finish()
    _check(r, "restart", findings, tasks=50)
    assert len(findings.outages) >= 3 and max(findings.outages) > 3.0, findings.outages


def test_every_fault_together_keeps_one_worker_at_a_time(rig):
    """Connection and pub/sub kills, Redis restarts, kill -9 and SIGSTOP of workers at once: only those rerun a task."""
    r = rig(seed=7)
    if SOAK:
        faults = {"conn": (0.3, 1.0), "pubsub": (0.3, 1.0), "restart": (12.0, 30.0), "kill9": (40.0, 70.0)}
        targets = {"conn": 2000, "pubsub": 2000, "restart": 50, "kill9": 20}
    else:
        faults = {
            "conn": (0.3, 1.0),
            "pubsub": (0.3, 1.0),
            "restart": (8.0, 12.0),
            "kill9": (10.0, 14.0),
            "freeze": (14.0, 18.0),
        }
        targets = {"restart": 2, "kill9": 2, "freeze": 1}
    r.start(faults, rate=30 if SOAK else 60)  # (a soak's backlog must not grow for half an hour)
    r.run_until(targets=targets, limit=3300 if SOAK else 60)
    findings = r.finish()
    _check(r, "all-soak" if SOAK else "all", findings)
    assert all(findings.faults[k]["strikes"] >= n for k, n in targets.items()), findings.faults
