"""Redis outages and partitions with real workers (a private redis-server with AOF, every run
logged to the session's Redis: tests/fault_rig.py): a worker killed -9 while Redis is down has its
task back within the documented bound once Redis answers again, a worker cut off from Redis while
another reaches it is still reaped (and stops its task when it is back), and a schedule's tick
that falls once Redis is back runs."""

import json
import time

import pytest

from chaos.proxy import Proxy
from queues.engine import keys
from tests.conftest import wait_for
from tests.fault_rig import Rig

TTL, INTERVAL = 3.0, 1.0  # the test settings' HEARTBEAT_TTL and the default HEARTBEAT_INTERVAL


@pytest.fixture
def rig(workers, client):
    made = []

    def make(**kwargs):
        made.append(Rig(workers, client, ["sf"], **kwargs))
        return made[-1]

    yield make
    for r in made:
        r.close()


def _runs_of(rig, task_id):
    return rig.runs().get(task_id, [])


def _running_on(rig, name, task_id, timeout=20):
    pid = rig.procs[name].pid
    return wait_for(
        lambda: [r for r in _runs_of(rig, task_id) if r.pid == pid],
        timeout=timeout,
        message=f"task {task_id} to start on {name}",
    )


def _a_task_behind_a_proxy(rig, sleep):
    """sfw-1, behind a proxy, runs a task of ``sleep`` s; then sfw-2 serves the queue straight.
    Returns (the queue, the proxy, the task's id)."""
    q = rig.producer("sf")
    proxy = Proxy(rig.server.port).start()
    rig.add_worker(url=proxy.url, concurrency=1)
    rig.wait_serving()
    tid = q.enqueue(json.dumps({"sleep": sleep}))
    _running_on(rig, "sfw-1", tid)
    rig.add_worker(concurrency=1)
    rig.wait_serving()
    return q, proxy, tid


def test_a_worker_killed_while_redis_is_down_has_its_task_back_within_the_bound(rig):
    """Redis down 4 s, a worker killed -9 meanwhile: its task runs again on the other within TTL + 2 intervals of ..."""
    # ... Redis answering again (the first beat after the gap gives every worker a TTL), and the other worker's own
    # task runs on, once.
    r = rig()
    q = r.producer("sf")
    a = r.add_worker(concurrency=1)
    r.wait_serving()
    doomed = q.enqueue(json.dumps({"sleep": 60}))
    _running_on(r, "sfw-1", doomed)
    r.add_worker(concurrency=2)
    r.wait_serving()
    kept = q.enqueue(json.dumps({"sleep": 25}))  # sfw-1 is full: it goes to sfw-2
    _running_on(r, "sfw-2", kept)
    r.server.kill()
    r.killed[a.pid] = time.time()
    r.live.pop("sfw-1")
    a.kill()
    time.sleep(4)
    r.server.start()
    back = time.time()
    again = _running_on(r, "sfw-2", doomed, timeout=30)[0]
    assert again.start - back <= TTL + 2 * INTERVAL + 2.0, (
        f"the killed worker's task ran again {again.start - back:.1f} s after"
    )
    assert len(_runs_of(r, kept)) == 1 and _runs_of(r, kept)[0].end is None  # untouched, still running


def test_a_worker_cut_off_while_another_reaches_redis_is_reaped_and_stops_its_task(rig):
    """A worker behind a proxy that refuses it for TTL + 4 s while another worker beats: it is reaped, its task runs ..."""
    # ... again on the other worker, and once it reaches Redis again it stops its own run (cancelled): the task
    # completes once. (While it is cut off both runs go on: the documented limit of a partition.)
    r = rig()
    q, proxy, tid = _a_task_behind_a_proxy(r, 12)
    cut_at = time.time()
    proxy.cut(refuse_for=TTL + 4)
    again = _running_on(r, "sfw-2", tid, timeout=30)[0]
    assert again.start - cut_at <= TTL + 2 * INTERVAL + 2.0, (
        f"the cut-off worker's task ran again {again.start - cut_at:.1f} s after"
    )
    first = wait_for(
        lambda: [x for x in _runs_of(r, tid) if x.pid == r.procs["sfw-1"].pid and x.end is not None],
        timeout=TTL + 15,
        message="the cut-off worker to stop its run once back",
    )[0]
    assert first.outcome == "cancelled" and first.end - cut_at <= TTL + 4 + 5
    assert "was presumed dead in sf" in r.procs["sfw-1"].output()
    wait_for(lambda: q.counts()["completed"] == 1, timeout=30, message="the task to complete")
    assert [x.outcome for x in _runs_of(r, tid)] == ["cancelled", "ok"]


def test_a_worker_whose_registering_again_is_reset_seven_times_is_not_reaped(rig):
    """Redis lost a worker's heartbeat key (it registers again) and its connection is reset on each of 7 tries: ..."""
    # ... it retries as a beat does (0.5 s apart at most), so it is registered again before its queue's deadline
    # (a TTL after its last beat) and the other worker does not reap it: its task runs once. With start-up's pauses
    # (50 ms doubling to 2 s) the 7 tries took 5 s and it was reaped.
    r = rig()
    q, proxy, tid = _a_task_behind_a_proxy(r, 8)
    try:
        events = r.direct.pubsub()
        events.subscribe(keys.queue_events_channel("sf"))
        # Each try of the registration adds the worker to the registry first: that reply is lost, 7 times.
        registry_add = f"{keys.WORKER_REGISTRY}\r\n$5\r\nsfw-1\r\n".encode()
        proxy.lose_replies(every=1, match=registry_add, limit=7)
        r.direct.delete(keys.heartbeat_key("sfw-1"))
        wait_for(lambda: proxy.lost == 7, timeout=30, message="the 7 tries to be reset")
        worker = r.procs["sfw-1"]
        wait_for(lambda: r.direct.exists(keys.heartbeat_key("sfw-1")), message="the worker to register again")
        wait_for(lambda: q.counts()["completed"] == 1, timeout=30, message="the task to complete")
        failed = []
        while (msg := events.get_message(timeout=0.1)) is not None:
            if msg["type"] == "message" and json.loads(msg["data"]).get("e") == "worker_failed":
                failed.append(json.loads(msg["data"])["w"])
        events.close()
        assert "registering again" in worker.output()
        assert failed == [], f"workers reaped: {failed}"
        assert [x.outcome for x in _runs_of(r, tid)] == ["ok"], _runs_of(r, tid)
        assert "presumed dead" not in worker.output()
    finally:
        proxy.stop()


def test_a_15_s_restart_reruns_nothing_and_keeps_locks(rig):
    """Redis killed -9 for 15 s under two workers running tasks on lock L (one waits) and a free one: nothing ..."""
    # ... runs twice, no worker is reaped, and the waiter on L starts only after its holder ended. The bound: an
    # outage shorter than min(29 s, LOCK_TTL - 2 x HEARTBEAT_INTERVAL) reruns nothing, whatever the HEARTBEAT_TTL.
    r = rig()
    q = r.producer("sf")
    for _ in range(2):
        r.add_worker(concurrency=2)
    r.wait_serving()
    holder = q.enqueue(json.dumps({"sleep": 20, "lock": "L"}), lock="L")
    waiter = q.enqueue(json.dumps({"sleep": 1, "lock": "L"}), lock="L")
    free = q.enqueue_many([json.dumps({"sleep": 18})] * 2)
    wait_for(lambda: all(_runs_of(r, t) for t in (holder, *free)), timeout=20, message="the tasks to start")
    r.server.kill()
    time.sleep(15)
    r.server.start()
    wait_for(lambda: q.counts()["completed"] == 4, timeout=60, message="the four tasks to complete")
    runs = {t: _runs_of(r, t) for t in (holder, waiter, *free)}
    r.report("outage-15", r.findings())
    assert all(len(rs) == 1 and rs[0].outcome == "ok" for rs in runs.values()), runs
    assert runs[waiter][0].start >= runs[holder][0].end
    assert not [n for n, w in r.procs.items() if "presumed dead" in w.output()]


def test_a_tick_that_falls_once_redis_is_back_runs(rig):
    """A 1 s schedule ('skip' missed ticks), Redis killed -9 three times for 2.5-4.5 s: every tick due once Redis ..."""
    # ... answered again runs (the scheduler's backoff reached 2 s: the tick that fell before it called again was
    # skipped as missed).
    r = rig()
    declared = {"pulse": {"queue": "sf", "every": 1, "payload": "{}"}}
    r.add_worker(settings="tests.settings_schedules", env={"WORQR_TEST_SCHEDULES": json.dumps(declared)})
    r.wait_serving()

    def ticks():
        return {json.loads(x.meta)["tick"] for rs in r.runs().values() for x in rs if x.meta}

    wait_for(ticks, timeout=20, message="the first run")
    for down in (2.5, 3.5, 4.5):
        r.server.kill()
        time.sleep(down)
        r.server.start()
        back_ms = int(time.time() * 1000)
        time.sleep(3.5)
        due = list(range(back_ms // 1000 * 1000 + 1000, back_ms + 3000, 1000))
        wait_for(lambda due=due: set(due) <= ticks(), timeout=10, message=lambda due=due: f"runs of {due}: {ticks()}")
