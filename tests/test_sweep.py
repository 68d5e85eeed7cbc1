"""The workers' queue sweep (``engine/sweep.py``, issue 32): one worker at a time sums every
queue into the summary the overview shows above 500 queues, and forgets the queues left empty
and unused for ``QUEUE_FORGET_AFTER``, never one in use (checked again atomically)."""

import pytest
from django.test import Client

from queues import Queue
from queues.conf import build_config
from queues.engine import commands, keys, readmodel, sweep
from tests.conftest import wait_for, wait_registered
from tests.support.dashboard import make_queue_names, staff

HOUR_MS = 3600 * 1000


class Clock:
    """Redis's time, moved on by hand (``skip``): the sweep's notion of "long enough"."""

    def __init__(self):
        self.offset = 0

    def __call__(self, client):
        return readmodel.server_ms(client) + self.offset

    def skip(self, ms):
        self.offset += ms


@pytest.fixture
def sweeper(client):
    """A sweep of its own (as one worker runs it) with QUEUE_FORGET_AFTER = 1 h and a clock."""
    clock = Clock()
    s = sweep.Sweep("sweeper-a", build_config().with_(queue_forget_after=3600), clock=clock)
    s.clock_ = clock
    return s


def full_pass(s, client):
    """Run a pass to its end, now (whatever EVERY says)."""
    s.next_try = 0.0
    while s.step(client) and s.names is not None:
        pass


def known(client):
    return sorted(m.decode() for m in client.smembers(keys.KNOWN_QUEUES))


def test_a_worker_sums_every_queue_for_an_overview_of_more_than_500(client, workers, transactional_db):
    """With 700 queues a real worker's sweep writes the summary, and the overview shows its totals."""
    names = make_queue_names(client, 700)
    Queue(names[0]).enqueue_many(["a", "b"], delay=60)
    workers(["t1"], name="summer")
    wait_registered(client, "summer")
    summary = wait_for(lambda: readmodel.summary(client), timeout=30, message="the sweep's summary")
    assert summary["queues"] == 701 and summary["totals"]["pending"] == 700 and summary["totals"]["delayed"] == 2
    web = Client()
    web.force_login(staff("summary"))
    page = web.get("/queues/").content.decode()
    assert '<span class="wq-n">700</span><span>pending</span>' in page
    assert '<span class="wq-n">701</span><span>queues, summed at ' in page


def test_one_worker_sweeps_at_a_time_and_another_takes_over(client, sweeper):
    """A second sweeper waits while the first holds the lease, and takes over once it is gone."""
    make_queue_names(client, 10)
    other = sweep.Sweep("sweeper-b", sweeper.config)
    assert sweeper.step(client) == 10 and other.step(client) == 0
    assert readmodel.summary(client)["queues"] == 10
    client.delete(keys.SWEEPER)  # its lease ran out (the worker stopped)
    other.next_try = 0.0
    assert other.step(client) == 10


def test_an_empty_unused_queue_is_forgotten_and_made_again_by_an_enqueue(client, sweeper):
    """Found empty, then again an hour later with nothing enqueued: its keys go and it is no longer known."""
    q = Queue("idle")
    q.cancel(q.enqueue("x"))
    Queue("busy").enqueue("y")
    full_pass(sweeper, client)
    assert known(client) == ["busy", "idle"] and client.hexists(keys.QUEUES_IDLE, "idle")
    sweeper.clock_.skip(HOUR_MS - 60_000)
    full_pass(sweeper, client)
    assert known(client) == ["busy", "idle"]  # not long enough yet
    sweeper.clock_.skip(60_000)
    full_pass(sweeper, client)
    assert known(client) == ["busy"] and not client.hexists(keys.QUEUES_IDLE, "idle")
    assert [k for k in client.scan_iter("worqr:{idle}:*") if not k.endswith((b":leases", b":seen"))] == []
    q.enqueue("back")  # made again, counted again (under MAX_QUEUES)
    assert known(client) == ["busy", "idle"] and q.counts()["pending"] == 1 and q.counts()["enqueued"] == 1


@pytest.mark.parametrize(
    "use",
    [
        "an enqueue since",
        "a worker",
        "paused",
        "limits",
        "a schedule",
        "a delayed task",
        "a failed task",
        "a blocked task",
    ],
)
def test_a_queue_in_use_is_never_forgotten(client, sweeper, use):
    """A queue used since it was found empty, or served, paused, limited, scheduled or holding a task, stays."""
    # (Used since: it stays until found empty and unused for another hour; the others, while so.)
    q = Queue("used")
    q.cancel(q.enqueue("x"))
    full_pass(sweeper, client)  # found empty
    if use == "an enqueue since":
        q.cancel(q.enqueue("again"))  # empty again, but used meanwhile
    elif use == "a worker":
        commands.register("used", "w1", ttl=3600, lock_ttl=3600, grace=1, default_timeout=0, fresh=True).run(client)
    elif use == "paused":
        q.pause()
    elif use == "limits":
        q.set_limits(concurrency=2)
    elif use == "a schedule":
        commands.schedule_sync("used", "nightly", '{"queue": "used"}', "v1", 0, enabled=True).run(client)
    elif use == "a delayed task":
        q.enqueue("later", delay=3600)
    elif use == "a failed task":
        commands.register("used", "w2", ttl=3600, lock_ttl=3600, grace=1, default_timeout=0, fresh=True).run(client)
        q.enqueue("fails", retries=0)
        (task,) = (
            commands.start("used", "w2", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client).tasks
        )
        commands.fail("used", "w2", task.id, task.lease, "E", "", retries=0, backoff=0, backoff_max=0, jitter=0,
                      history=5).run(client)  # fmt: skip
        commands.unregister("used", "w2").run(client)
    elif use == "a blocked task":
        parent = Queue("parents").enqueue("p")
        q.enqueue("child", after=[parent])
    for _ in range(1 if use == "an enqueue since" else 2):  # used since: the hour starts again
        sweeper.clock_.skip(2 * HOUR_MS)
        full_pass(sweeper, client)
        assert "used" in known(client) and client.exists(keys.queue_key("used", "meta")), use


def test_forget_keeps_a_queue_an_enqueue_reached_after_the_sweep_looked(client):
    """forget() with the enqueued count the sweep saw keeps the queue once a task came and went since."""
    q = Queue("raced")
    q.cancel(q.enqueue("x"))
    seen = q.counts()["enqueued"]
    q.cancel(q.enqueue("y"))  # the race: in between, a task was enqueued (and ended)
    assert sweep.forget(client, "raced", seen) is False and "raced" in known(client)
    assert sweep.forget(client, "raced", seen + 1) is True and "raced" not in known(client)


def test_forgetting_off_keeps_every_queue(client):
    """QUEUE_FORGET_AFTER = 0 never forgets."""
    q = Queue("kept")
    q.cancel(q.enqueue("x"))
    clock = Clock()
    s = sweep.Sweep("keeper", build_config().with_(queue_forget_after=0), clock=clock)
    for _ in range(3):
        full_pass(s, client)
        clock.skip(400 * 24 * HOUR_MS)
    assert known(client) == ["kept"] and not client.exists(keys.QUEUES_IDLE)


def test_the_setting_is_checked(client):
    """MAX_QUEUES and QUEUE_FORGET_AFTER out of range are configuration errors."""
    from queues.engine.errors import ConfigurationError

    for bad in ({"max_queues": 0}, {"queue_forget_after": 60}, {"queue_forget_after": 400 * 86400}):
        with pytest.raises(ConfigurationError):
            build_config().with_(**bad)
