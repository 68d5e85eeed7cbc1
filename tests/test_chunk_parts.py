"""How a chunk's outcome reaches its tasks, in an in-process worker: the call's end reports its
tasks without a loop callback per task, and an async chunk's cancel and timeout during the call
still end each task on its own."""

import asyncio
import threading
import time

import pytest

from queues import Queue, handler
from queues.engine import keys
from tests.conftest import wait_for

SEEN = {}  # queue -> per call: {id: whether it was told cancelled}


def _record(tasks):
    SEEN.setdefault(tasks[0].queue, []).append({t.id: t.cancelled for t in tasks})


def chunk_noop(tasks):
    _record(tasks)


async def achunk_noop(tasks):
    _record(tasks)


async def achunk_slow(tasks):
    try:
        await asyncio.sleep(1.0)
    except asyncio.CancelledError:
        SEEN.setdefault("stopped", []).append(tasks[0].queue)
        raise
    _record(tasks)


handler("cparts-sync", chunk=100, chunk_wait=0.2)(chunk_noop)
handler("cparts-async", chunk=100, chunk_wait=0.2)(achunk_noop)
handler("cparts-cancel", chunk=10, chunk_wait=0.2)(achunk_slow)
handler("cparts-timeout", chunk=10, chunk_wait=0.2, timeout=0.3, retries=0)(achunk_slow)


def run_worker(conn, queue, until):
    """A Worker on ``queue`` in this process (on a thread) until ``until()``."""
    from queues.engine.worker.launcher import Worker

    worker = Worker([queue], conn, concurrency=2, name=f"{queue}-w", grace=2.0)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(until, timeout=60, message=f"{queue} to end")
    finally:
        wait_for(lambda: hasattr(worker, "loop"), timeout=10, message="the loop")
        worker.loop.call_soon_threadsafe(worker.request_stop)
        thread.join(15)
    assert not thread.is_alive() and worker.error is None


def ended(queue, n):
    counts = Queue(queue).counts()
    return counts["completed"] + counts["failed"] + counts["cancelled"] >= n and counts


@pytest.mark.parametrize("queue", ["cparts-sync", "cparts-async"])
def test_a_chunks_end_reports_its_tasks_without_a_loop_callback_each(conn, monkeypatch, queue):
    """Draining 1,000 tasks in chunks of 100 schedules under 0.5 loop callbacks per task (a future per task scheduled 2)."""
    Queue(queue).enqueue_many(["x"] * 1000)
    calls = [0]
    call_soon = asyncio.BaseEventLoop.call_soon

    def counted(loop, *args, **kwargs):
        calls[0] += 1
        return call_soon(loop, *args, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "call_soon", counted)
    run_worker(conn, queue, lambda: ended(queue, 1000))
    counts = Queue(queue).counts()
    assert counts["completed"] == 1000, counts
    ids = [i for call in SEEN[queue] for i in call]
    assert len(ids) == len(set(ids)) == 1000
    assert calls[0] / 1000 < 0.5, calls[0]


def test_an_async_chunks_task_cancelled_during_the_call_ends_cancelled_and_the_call_goes_on(conn, client):
    """Async chunk of 10: one task cancelled during the call ends cancelled at once, the call is not stopped, 9 complete."""
    q = Queue("cparts-cancel")
    ids = q.enqueue_many(["x"] * 10)
    done = {}

    def cancel_once_running():
        if not done and q.counts()["active"] == 10:
            time.sleep(0.2)
            done["at"] = time.monotonic()
            assert q.cancel(ids[3]) is True
        return done and ended("cparts-cancel", 10)

    run_worker(conn, "cparts-cancel", cancel_once_running)
    counts = q.counts()
    assert counts["completed"] == 9 and counts["cancelled"] == 1, counts
    assert q.get(ids[3]) is None or q.get(ids[3]).state == "cancelled"
    assert SEEN["cparts-cancel"] == [{i: i == ids[3] for i in ids}]  # one call, told of the cancel
    assert "cparts-cancel" not in SEEN.get("stopped", [])


def test_an_async_chunk_past_its_timeout_fails_each_task_and_the_call_is_stopped(conn, client):
    """Async chunk of 10, timeout=0.3 s, a 1 s call: each task fails with TaskTimeout and the call is cancelled."""
    q = Queue("cparts-timeout")
    ids = q.enqueue_many(["x"] * 10)
    run_worker(conn, "cparts-timeout", lambda: ended("cparts-timeout", 10))
    counts = q.counts()
    assert counts["failed"] == 10 and counts["completed"] == 0, counts
    assert {client.hget(keys.task_key("cparts-timeout", i), "e") for i in ids} == {
        b"TaskTimeout: ran longer than its timeout of 0.3 s"
    }
    wait_for(lambda: "cparts-timeout" in SEEN.get("stopped", []), timeout=5, message="the call to be cancelled")
    assert "cparts-timeout" not in SEEN
