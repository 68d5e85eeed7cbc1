"""Stress: a cancel stops its task however it races the hand-over or the worker's control
channel (right after a push, before the start reply lands, before the first subscription, during a
reconnect)."""

import asyncio
import json
import threading
import time

import pytest

from queues import Queue
from queues.engine.worker.fetch import Fetcher
from queues.engine.worker.launcher import Worker
from tests.conftest import wait_for
from tests.stress import MARKS, events, scaled, subscribed_clients, wait_ready, wait_until

pytestmark = MARKS


@pytest.mark.parametrize("queue", ["sta1", "st1"], ids=["async", "sync"])
def test_a_cancel_right_after_the_hand_over_stops_the_task(client, workers, queue):
    """An idle worker is handed a task with a 1 s handler that is cancelled at once, 40 times over."""
    # none of them runs to completion.
    q = Queue(queue)
    workers([queue], concurrency=1, name="race")
    wait_ready(client, "race")
    ids = []
    for _ in range(scaled(40, 400)):
        tid = q.enqueue(json.dumps({"sleep": 1}))
        assert q.cancel(tid) is True
        ids.append(tid)
        wait_for(lambda tid=tid: q.get(tid) is None, timeout=10, message="the cancelled task to leave")
    completed = [e["id"] for e in events(client, queue, "end") if e["outcome"] == "ok"]
    started = {e["id"] for e in events(client, queue, "start")}
    assert completed == [], f"{len(completed)} of {len(ids)} cancelled tasks ran to completion ({len(started)} started)"
    c = q.counts()
    assert (c["cancelled"], c["completed"], c["pending"], c["active"]) == (len(ids), 0, 0, 0)


@pytest.mark.parametrize("queue", ["sta1", "st1"], ids=["async", "sync"])
def test_a_cancel_heard_before_the_start_reply_lands_never_starts_the_handler(conn, client, monkeypatch, queue):
    """A real Worker hears a task's cancel before its start reply is handled: the handler never starts."""
    # The worker (in this process, on a thread) takes the task with `start`; before it handles the
    # reply, the task is cancelled in Redis and the cancel reaches it over its control channel
    # while it does not know the task yet. Then the reply lands and the fetcher starts the delivery.
    q = Queue(queue)
    tid = q.enqueue(json.dumps({"sleep": 2}))
    fetch = Fetcher._fetch
    heard = []

    async def fetch_then_cancel(self, free, acks, behind):
        taken, *rest = got = await fetch(self, free, acks, behind)
        if any(d.task.id == tid for d in taken):
            assert await asyncio.to_thread(q.cancel, tid) is True
            deadline = time.monotonic() + 5
            while (queue, tid) not in self.deliveries.early_cancels and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            heard.append((queue, tid) in self.deliveries.early_cancels)
        return got

    monkeypatch.setattr(Fetcher, "_fetch", fetch_then_cancel)
    worker = Worker([queue], conn, concurrency=1, name="early-cancel", grace=1.0)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: heard, timeout=15, message="the worker to take the task")
        assert heard == [True], "the cancel never reached the worker"
        wait_for(lambda: q.get(tid) is None, timeout=10, message="the cancelled task to leave")
        time.sleep(0.2)  # a handler started by mistake has logged its start by now
        assert events(client, queue, "start") == [], "the handler of a task cancelled before it started ran"
        c = q.counts()
        assert (c["cancelled"], c["completed"], c["active"]) == (1, 0, 0)
    finally:
        worker.loop.call_soon_threadsafe(worker.request_stop)
        thread.join(15)
    assert not thread.is_alive() and worker.error is None


def _stopped_promptly(client, queue, tid, cancelled_at, within=3.0):
    """Problems with how the cancelled task ``tid`` ended: it must leave Redis, and its handler
    (if it started) must stop within ``within`` seconds of the cancel."""
    wait_for(lambda: Queue(queue).get(tid) is None, timeout=15, message="the cancelled task to leave")
    ends = [e for e in events(client, queue, "end") if e["id"] == tid]
    starts = [e for e in events(client, queue, "start") if e["id"] == tid]
    problems = []
    if len(starts) > 1:
        problems.append(f"its handler started {len(starts)} times")
    for e in ends:
        if e["outcome"] != "cancelled" or e["t"] - cancelled_at > within:
            problems.append(f"its handler ran on for {e['t'] - cancelled_at:.1f} s after the cancel ({e['outcome']})")
    return problems


@pytest.mark.parametrize("queue", ["sta1", "st1"], ids=["async", "sync"])
def test_a_cancel_sent_before_the_worker_subscribed_still_stops_the_task(client, workers, queue):
    """A worker starting while Redis refuses its control connection (maxclients) either takes no task before it ..."""
    # ... listens, or a cancel sent while it can't hear still stops the task once it has subscribed.
    q = Queue(queue)
    tid = q.enqueue(json.dumps({"sleep": 8}))
    saved = client.config_get("maxclients")["maxclients"]
    staged = False
    try:
        # Room for one more connection: the worker's first; its control connection (and the
        # handler's own, which keeps trying) is refused until maxclients is raised again.
        client.config_set("maxclients", client.info("clients")["connected_clients"] + 1)
        workers([queue], concurrency=1, name="early")
        staged = wait_until(lambda: (t := q.get(tid)) is not None and t.state == "active", timeout=8, interval=0)
        if staged:
            assert subscribed_clients(client) == []
            cancelled_at = time.time()
            assert q.cancel(tid) is True
    finally:
        client.config_set("maxclients", saved)
    wait_for(lambda: subscribed_clients(client), timeout=15, message="the worker to subscribe")
    if not staged:  # it took no task before it could listen: cancel it the ordinary way
        cancelled_at = time.time()
        assert q.cancel(tid) is True
    problems = _stopped_promptly(client, queue, tid, cancelled_at, within=5.0)
    assert not problems, "; ".join(problems)
    assert q.counts()["cancelled"] == 1 and q.counts()["completed"] == 0


@pytest.mark.parametrize("queue", ["sta1", "st1"], ids=["async", "sync"])
def test_a_cancel_sent_while_the_worker_resubscribes_still_stops_the_task(client, workers, queue):
    """A running task is cancelled in the moment its worker's control connection is down (killed just before)."""
    # once the worker has resubscribed it stops the task, within 3 s. redis-py's pub/sub reconnects within milliseconds,
    # so the cancel does not always land in the gap: the test tries up to 6 tasks, checks every one stops in time, and
    # needs at least one race made.
    q = Queue(queue)
    workers([queue], concurrency=1, name="resub")
    wait_ready(client, "resub")
    raced = 0
    for attempt in range(6):
        tid = q.enqueue(json.dumps({"sleep": 10}))
        wait_for(lambda t=tid: [e for e in events(client, queue, "start") if e["id"] == t], message="the task to start")
        wait_for(lambda: subscribed_clients(client), message="the worker to listen")
        for _ in range(20):
            client.client_kill_filter(_type="pubsub")
            cancelled_at = time.time()
            if not subscribed_clients(client):
                break
        assert q.cancel(tid) is True
        raced += subscribed_clients(client) == []
        problems = _stopped_promptly(client, queue, tid, cancelled_at)
        assert not problems, f"attempt {attempt}: " + "; ".join(problems)
        assert q.counts()["cancelled"] == attempt + 1 and q.counts()["completed"] == 0
        if raced:
            break
    assert raced, "the worker resubscribed before the cancel every time: no race made"
