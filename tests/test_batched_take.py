"""Batched take and acknowledge: under load one ``start`` call acknowledges and takes many tasks,
so Redis's script calls per task fall towards 1/k (k: the worker's free slots, or a chunk's
size), counted by Redis itself (INFO commandstats), never by the wall clock; an idle worker
still takes a lone task at once."""

import pytest

from queues import Queue
from queues.engine import keys
from tests.conftest import wait_for, wait_registered

N = 3000


def script_calls(client):
    """Scripts Redis has run so far (EVALSHA and EVAL)."""
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("evalsha", "eval"))


def completed(client, queue):
    """The queue's completed counter, read without a script (so it is not counted)."""
    return int(client.hget(keys.queue_key(queue, "stats"), "completed") or 0)


def drain_calls(client, workers, queue, concurrency, n=N):
    """Script calls per task while a worker of ``concurrency`` slots drains ``n`` queued tasks."""
    Queue(queue).enqueue_many(["x"] * n)
    name = f"{queue}-{concurrency}"
    before = script_calls(client)
    w = workers([queue], concurrency=concurrency, name=name)
    wait_for(lambda: completed(client, queue) >= n, timeout=120, interval=0.2, message=lambda: w.output()[-2000:])
    calls = script_calls(client) - before
    w.close()  # gone before the next drain, which it would share
    return calls / n


@pytest.mark.parametrize("queue", ["batch-noop", "batch-anoop"])
def test_script_calls_per_task_fall_with_the_free_slots(client, workers, queue):
    """Draining 3,000 no-op tasks with 16 slots costs under a fifth of the script calls per task of 1 slot."""
    one = drain_calls(client, workers, queue, 1)
    client.flushdb()
    many = drain_calls(client, workers, queue, 16)
    print(f"{queue}: script calls per task, 1 slot {one:.3f}, 16 slots {many:.3f}")
    assert 0.9 <= one <= 1.2, one  # one start call per task (acknowledging the one before)
    assert many < one / 5, (one, many)


def test_a_chunk_handler_takes_a_chunk_per_call(client, workers):
    """chunk=100: draining 3,000 tasks costs at most 0.05 script calls per task (one start per chunk)."""
    per_task = drain_calls(client, workers, "batch-chunk", 1)
    print(f"batch-chunk: script calls per task {per_task:.4f}")
    assert per_task <= 0.05, per_task


def test_an_idle_worker_takes_a_lone_task_at_once(client, workers):
    """An idle worker of 16 slots runs a lone task in one handed-over delivery, without waiting to fill a batch."""
    workers(["batch-noop"], concurrency=16, name="idle16")
    wait_registered(client, "idle16")
    wait_for(lambda: client.sismember(keys.queue_key("batch-noop", "idle"), "idle16"), timeout=30, message="idle")
    before = script_calls(client)
    Queue("batch-noop").enqueue("x")
    # it runs although 15 slots stay empty: nothing waits for a batch to fill
    wait_for(lambda: completed(client, "batch-noop") == 1, timeout=30, message="the task")
    wait_for(lambda: client.sismember(keys.queue_key("batch-noop", "idle"), "idle16"), timeout=30, message="idle")
    # push (declined: a worker is idle), enqueue (handing it over), the worker's start calls that
    # look for more and acknowledge it, a heartbeat maybe: no polling
    assert script_calls(client) - before <= 8
