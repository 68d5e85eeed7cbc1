"""Chunk handlers (``@handler(..., chunk=n, chunk_wait=s)``) in real worker processes: a drain of
10,000 tasks on two workers with ChunkFailed, the wait to fill a chunk, async and isolated chunk
handlers, a failure of the whole chunk, locks, limits and cancels, and bad options."""

import asyncio
import json
import os
import time

import pytest

from queues import ChunkFailed, Queue, handler
from queues.engine import keys, registry
from queues.engine.errors import ConfigurationError
from tests.conftest import wait_for, wait_registered


def chunks(client, queue):
    return [json.loads(r) for r in client.lrange(f"test:chunks:{queue}", 0, -1)]


def ended(queue, n):
    counts = Queue(queue).counts()
    return counts["completed"] + counts["failed"] >= n and counts


def errors_of_failed(client, queue):
    """{task id: its last error} of every failed task of ``queue``."""
    ids = [i.decode() for i in client.zrange(keys.queue_key(queue, "failed"), 0, -1)]
    p = client.pipeline(transaction=False)
    for task_id in ids:
        p.hget(keys.task_key(queue, task_id), "e")
    return {task_id: e.decode() for task_id, e in zip(ids, p.execute())}


def test_ten_thousand_tasks_in_chunks_of_100_with_a_thousand_failing(client, workers):
    """10,000 tasks, chunk=100, 2 workers, 1,000 by ChunkFailed: 9,000 completed, 1,000 failed with own messages, no task twice."""
    q = Queue("chunk-emails")
    ids = []
    for start in range(0, 10_000, 1000):
        payloads = [json.dumps({"n": n, "fail": n % 10 == 0}) for n in range(start, start + 1000)]
        ids += q.enqueue_many(payloads)
    number = {task_id: n for n, task_id in enumerate(ids)}
    for i in range(2):
        workers(["chunk-emails"], concurrency=2, name=f"ce{i}")
    counts = wait_for(lambda: ended("chunk-emails", 10_000), timeout=240, message="10,000 tasks to end")
    assert counts["completed"] == 9000 and counts["failed"] == 1000, counts
    errors = errors_of_failed(client, "chunk-emails")
    assert sorted(number[i] for i in errors) == list(range(0, 10_000, 10))
    assert all(e == f"ValueError: task {number[i]} failed" for i, e in errors.items())
    recs = chunks(client, "chunk-emails")
    seen = [task_id for r in recs for task_id in r["ids"]]
    assert len(seen) == len(set(seen)) == 10_000  # each task in exactly one chunk
    assert max(len(r["ids"]) for r in recs) == 100
    assert len({r["pid"] for r in recs}) == 2  # both workers took chunks
    assert len(recs) <= 10_000 // 100 + 10  # mostly full chunks: one call per 100 tasks


def test_a_partial_chunk_runs_after_chunk_wait(client, workers):
    """chunk=100, chunk_wait=1.0: 30 tasks run as one chunk of 30, about chunk_wait after they came."""
    workers(["chunk-wait"], concurrency=1, name="cw0")
    wait_registered(client, "cw0")
    enqueued = time.time()
    Queue("chunk-wait").enqueue_many([json.dumps({"n": n}) for n in range(30)])
    wait_for(lambda: ended("chunk-wait", 30), timeout=30, message="30 tasks")
    recs = chunks(client, "chunk-wait")
    assert [len(r["ids"]) for r in recs] == [30]
    assert recs[0]["start"] - enqueued >= 0.9  # it waited for the chunk to fill


def test_a_task_waiting_for_its_chunk_is_not_timed_out_before_the_call(client, workers):
    """chunk_wait=6 past timeout=1 + grace 2: the task's timeout counts from its chunk's call, in Redis too (completed)."""
    workers(["chunk-waitlong"], concurrency=1, name="cwl0")
    wait_registered(client, "cwl0")
    enqueued = time.time()
    (task_id,) = Queue("chunk-waitlong").enqueue_many([json.dumps({"n": 0})])
    counts = wait_for(lambda: ended("chunk-waitlong", 1), timeout=30, message="the task to end")
    assert counts["completed"] == 1 and counts["failed"] == 0, counts  # not failed as timed out (retries=0)
    recs = chunks(client, "chunk-waitlong")
    assert [r["ids"] for r in recs] == [[task_id]] and recs[0]["cancelled"] == []
    assert recs[0]["start"] - enqueued >= 5.5  # it did wait for its chunk to fill


def test_a_rate_limited_chunk_queue_runs_its_partial_chunks(client, workers):
    """chunk=10, rate=5/s, chunk_wait 1 s (past the rate's start grace): 20 tasks run, in partial chunks, each once."""
    q = Queue("chunk-rate")
    ids = q.enqueue_many([json.dumps({"n": n}) for n in range(20)])
    workers(["chunk-rate"], concurrency=2, name="crt0")
    counts = wait_for(lambda: ended("chunk-rate", 20), timeout=60, message="20 tasks to end")
    assert counts["completed"] == 20 and counts["failed"] == 0, counts
    seen = [task_id for r in chunks(client, "chunk-rate") for task_id in r["ids"]]
    assert sorted(seen) == sorted(ids)  # each once


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_a_task_stopped_during_an_async_chunk_s_call_keeps_its_lock_till_the_call_returns(client, workers, how):
    """Async chunk, a 3 s call: A times out at 1 s (or is cancelled); the next task of A's lock starts after the call."""
    # The call goes on for B; the next task of A's lock is A's retry (timeout) or a new task (cancel).
    q = Queue("chunk-lock-async")
    a = q.enqueue(json.dumps({"n": 0, "k": "A", "sleep": 3}), **({"timeout": 1} if how == "timeout" else {}))
    q.enqueue(json.dumps({"n": 1, "k": "B", "sleep": 3}))
    workers(["chunk-lock-async"], concurrency=2, name=f"cla-{how}")
    wait_for(lambda: q.counts()["active"] == 2, timeout=30, message="the chunk's call")
    if how == "cancel":
        time.sleep(0.5)
        assert q.cancel(a) is True
        next_id = q.enqueue(json.dumps({"n": 2, "k": "A"}))  # A's lock, free once the first call returns
    else:
        next_id = a  # its retry
    calls = wait_for(
        lambda: len(c := client.lrange("test:chunk-calls:chunk-lock-async", 0, -1)) >= 2 and [json.loads(x) for x in c],
        timeout=30,
        message="the next call of A's lock",
    )
    first = wait_for(
        lambda: next((r for r in chunks(client, "chunk-lock-async") if a in r["ids"]), None),
        timeout=30,
        message="the first call's end",
    )
    assert a in first["ids"] and a in calls[0]["ids"] and next_id in calls[1]["ids"], calls
    assert calls[1]["start"] >= first["end"] - 0.05, (first, calls)  # never two tasks of lock A at once


def test_a_partial_chunk_keeps_its_slot_from_another_queue_s_tasks(client, workers):
    """--concurrency 1, a chunk queue and a plain one: a partial chunk keeps its slot, the two calls never overlap."""
    workers(["chunk-slot", "plain-slot"], concurrency=1, name="cs0")
    wait_registered(client, "cs0")
    Queue("chunk-slot").enqueue_many([json.dumps({"n": n, "sleep": 1}) for n in range(3)])  # waits 0.5 s to fill
    time.sleep(0.1)
    Queue("plain-slot").enqueue(json.dumps({"n": 3, "sleep": 1}))
    wait_for(lambda: ended("chunk-slot", 3) and ended("plain-slot", 1), timeout=30, message="4 tasks")
    runs = []
    for queue in ("chunk-slot", "plain-slot"):
        starts = [json.loads(x) for x in client.lrange(f"test:chunk-calls:{queue}", 0, -1)]
        ends = chunks(client, queue)
        assert len(starts) == len(ends) == 1, (starts, ends)
        runs.append((starts[0]["start"], ends[0]["end"]))
    (s1, e1), (s2, e2) = sorted(runs)
    assert s2 >= e1 - 0.05, runs  # one after the other: one slot


def test_a_wake_up_for_the_slot_a_partial_chunk_keeps_goes_on_to_another_idle_worker(client, workers):
    """--concurrency 1 with a partial chunk waiting: a wake-up for another queue is passed on, not swallowed."""
    # cw1's one slot is kept for its partial chunk (8 s of chunk_wait); a wake-up of plain-wake
    # (rate-limited: its idle workers are woken, not handed tasks) that reaches cw1 must go on to
    # cw0, idle too, rather than leave the task waiting for cw1's chunk to run and end. Several
    # tasks, one at a time, both workers idle in plain-wake first, so that wake-ups reach cw1.
    workers(["chunk-wakewait", "plain-wake"], concurrency=1, name="cw1")
    workers(["plain-wake"], concurrency=1, name="cw0")
    idle = keys.queue_key("plain-wake", "idle")
    wait_for(lambda: client.smembers(idle) == {b"cw0", b"cw1"}, message="both idle in plain-wake")
    Queue("chunk-wakewait").enqueue_many([json.dumps({"n": n}) for n in range(3)])
    wait_for(lambda: client.scard(keys.worker_tasks_key("chunk-wakewait", "cw1")) == 3, message="cw1 to take 3")
    for n in range(6):
        Queue("plain-wake").enqueue(json.dumps({"n": n}))
        wait_for(lambda n=n: ended("plain-wake", n + 1), timeout=30, message=f"plain task {n}")
    wait_for(lambda: ended("chunk-wakewait", 3), timeout=30, message="the chunk")
    (call,) = [json.loads(x) for x in client.lrange("test:chunk-calls:chunk-wakewait", 0, -1)]
    plain = [json.loads(x)["start"] for x in client.lrange("test:chunk-calls:plain-wake", 0, -1)]
    assert len(plain) == 6 and max(plain) < call["start"], (plain, call)  # all while the chunk waited


def test_chunk_failed_naming_ids_not_in_the_chunk_fails_the_chunk_saying_so(client, workers):
    """ChunkFailed keyed by payloads (not task ids): every task fails with an error naming the mistake, none completes."""
    q = Queue("chunk-wrong-ids")
    q.enqueue_many(["p0", "p1", "p2"])
    workers(["chunk-wrong-ids"], name="cwi0")
    counts = wait_for(lambda: ended("chunk-wrong-ids", 3), timeout=30, message="3 tasks to end")
    assert counts["failed"] == 3 and counts["completed"] == 0, counts
    errors = set(errors_of_failed(client, "chunk-wrong-ids").values())
    assert len(errors) == 1 and errors.pop().startswith(
        "ValueError: ChunkFailed names 3 task id(s) not in its chunk of 3"
    )


@pytest.mark.parametrize("queue", ["chunk-stopiter", "chunk-stopiter-proc"], ids=["thread", "process"])
def test_chunk_failed_with_stop_iteration_fails_that_task_and_completes_the_rest(client, workers, queue):
    """ChunkFailed({id: StopIteration(...)}): that task fails saying so, the other two complete, the worker goes on."""
    q = Queue(queue)
    last = q.enqueue_many(["a", "b", "last"])[2]
    workers([queue], concurrency=1, name=f"{queue}-0")
    counts = wait_for(lambda: ended(queue, 3), timeout=30, message="3 tasks to end")
    assert (counts["completed"], counts["failed"]) == (2, 1), counts
    assert errors_of_failed(client, queue) == {last: "StopIteration: no more rows"}
    q.enqueue_many(["c", "d"])  # the worker's slot came back
    counts = wait_for(lambda: ended(queue, 5), timeout=30, message="2 more tasks to end")
    assert (counts["completed"], counts["failed"]) == (4, 1), counts


def test_an_isolated_chunk_s_retry_later_defers_its_task(client, workers):
    """isolation="process", retries=0: a RetryLater among ChunkFailed's defers that task (as on a thread), which then completes."""
    q = Queue("chunk-defer-proc")
    ids = q.enqueue_many([json.dumps({"n": 0, "defer": True}), json.dumps({"n": 1}), json.dumps({"n": 2})])
    workers(["chunk-defer-proc"], name="cdp0")
    counts = wait_for(lambda: ended("chunk-defer-proc", 3), timeout=60, message="3 tasks to end")
    assert counts["completed"] == 3 and counts["failed"] == 0, counts
    assert sum(ids[0] in r["ids"] for r in chunks(client, "chunk-defer-proc")) == 2  # deferred once, run again


def test_each_task_of_an_isolated_chunk_keeps_its_own_progress_and_log(client, workers):
    """isolation="process": task.progress() and task.log() of each task of the chunk land on that task."""
    q = Queue("chunk-progress-proc")
    ids = q.enqueue_many([json.dumps({"n": n}) for n in range(3)])
    workers(["chunk-progress-proc"], name="cpp0")

    def reported():
        tasks = [q.get(i) for i in ids]
        return all(t is not None and t.progress_message == f"mine is {n}" for n, t in enumerate(tasks))

    wait_for(reported, timeout=30, message="each task's own progress")
    logs = [client.lrange(keys.task_log_key("chunk-progress-proc", i), 0, -1) for i in ids]
    client.set("test:seen:chunk-progress-proc", 1)
    assert [[line.decode().endswith(f"line of {n}") for line in lines] for n, lines in enumerate(logs)] == [[True]] * 3
    counts = wait_for(lambda: ended("chunk-progress-proc", 3), timeout=60, message="3 tasks to end")
    assert counts["completed"] == 3, counts


@pytest.mark.parametrize("queue", ["chunk-async", "chunk-proc"])
def test_async_and_isolated_chunk_handlers(client, workers, queue):
    """Async and isolated chunk handlers: every task once, chunks up to their size, ChunkFailed's tasks with own messages."""
    size = 50 if queue == "chunk-async" else 20
    ids = Queue(queue).enqueue_many([json.dumps({"n": n, "fail": n % 7 == 0}) for n in range(300)])
    workers([queue], concurrency=2, name=f"{queue}-w")
    counts = wait_for(lambda: ended(queue, 300), timeout=90, message="300 tasks")
    failing = {ids[n]: n for n in range(300) if n % 7 == 0}
    assert counts["completed"] == 300 - len(failing) and counts["failed"] == len(failing), counts
    errors = errors_of_failed(client, queue)
    assert errors == {i: f"ValueError: task {n} failed" for i, n in failing.items()}
    recs = chunks(client, queue)
    seen = [task_id for r in recs for task_id in r["ids"]]
    assert sorted(seen) == sorted(ids) and max(len(r["ids"]) for r in recs) <= size


def test_raising_fails_the_whole_chunk(client, workers):
    """A chunk handler that raises anything else fails every task of its chunk with that error."""
    q = Queue("chunk-cancel")
    ids = q.enqueue_many([json.dumps({"n": n, "boom": n == 3}) for n in range(10)])
    workers(["chunk-cancel"], concurrency=1, name="cb0")
    counts = wait_for(lambda: ended("chunk-cancel", 10), timeout=30, message="10 tasks")
    assert counts["failed"] == 10 and counts["completed"] == 0, counts
    assert set(errors_of_failed(client, "chunk-cancel").values()) == {"RuntimeError: the whole chunk failed"}
    assert len(ids) == 10


def test_locks_keep_tasks_of_a_held_lock_out_of_the_chunk(client, workers):
    """lock by the payload's "k", 5 keys: no chunk holds two tasks of one lock, and all 100 run."""
    q = Queue("chunk-lock")
    ids = q.enqueue_many([json.dumps({"n": n, "k": n % 5, "sleep": 0.05}) for n in range(100)])
    workers(["chunk-lock"], concurrency=2, name="cl0")
    wait_for(lambda: ended("chunk-lock", 100), timeout=90, message="100 tasks")
    assert q.counts()["completed"] == 100
    key_of = {task_id: n % 5 for n, task_id in enumerate(ids)}
    for r in chunks(client, "chunk-lock"):
        lock_keys = [key_of[i] for i in r["ids"]]
        assert len(lock_keys) == len(set(lock_keys)), r  # one task per lock in a chunk


def test_a_chunk_counts_its_size_against_the_concurrency(client, workers):
    """concurrency=30, chunk=100, two workers: no two chunks running at once hold more than 30 tasks."""
    q = Queue("chunk-limit")
    q.enqueue_many([json.dumps({"n": n, "sleep": 0.2}) for n in range(300)])
    for i in range(2):
        workers(["chunk-limit"], concurrency=2, name=f"cx{i}")
    wait_for(lambda: ended("chunk-limit", 300), timeout=90, message="300 tasks")
    recs = chunks(client, "chunk-limit")
    assert max(len(r["ids"]) for r in recs) <= 30
    events = sorted([(r["start"], len(r["ids"])) for r in recs] + [(r["end"], -len(r["ids"])) for r in recs])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    assert most == 30, most  # the limit is reached and never passed


@pytest.mark.parametrize("queue", ["chunk-cancel", "chunk-cancel-proc"])
def test_cancels_before_and_during_the_call(client, workers, queue):
    """Cancelled before the call: left out; during it: told (task.cancelled, in a handler process too), ends cancelled."""
    q = Queue(queue)
    ids = q.enqueue_many([json.dumps({"n": n, "sleep": 2.0 if n < 10 else 0}) for n in range(10)])
    q.cancel(ids[0])  # before: never in a chunk
    workers([queue], concurrency=1, name="cc0")
    wait_for(lambda: client.llen(f"test:chunk-started:{queue}"), timeout=30, message="the chunk to start")
    q.cancel(ids[1])  # during the call
    wait_for(lambda: q.counts()["active"] == 0, timeout=30, message="the chunk to end")
    recs = chunks(client, queue)
    assert len(recs) == 1, recs
    assert ids[0] not in recs[0]["ids"] and ids[1] in recs[0]["ids"], (ids, recs)
    assert recs[0]["cancelled"] == [ids[1]]
    counts = q.counts()
    assert counts["completed"] == 8 and counts["cancelled"] == 2, counts


def test_a_handler_process_marks_the_chunk_tasks_its_worker_says_are_cancelled_and_skips_stale_cancels(client):
    """A chunk's process: cancel frames during the call mark those tasks; ones before or after a call are skipped."""
    import socket

    from queues.engine.task import Task
    from queues.engine.worker import child
    from queues.engine.worker.chunks import ChunkTasks

    queue = "chunk-cancel-proc"
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the handler process, as the fork server makes it
        ours.close()
        child.serve(theirs, os.getppid(), {queue: registry.get_handler(queue)})
    theirs.close()
    stream = ours.makefile("rb")

    def read():
        return child._frame_from(stream)  # as the process reads its own

    def task(sleep, pad=""):
        return Task(id=f"{queue}-{os.urandom(8).hex()}", queue=queue, payload=json.dumps({"sleep": sleep, "pad": pad}))

    try:
        assert read()[0] == "ready"
        ours.sendall(child.frame(("cancel", "no-such-task")))  # a call's that ended: skipped
        tasks = ChunkTasks([task(60), task(60)])
        ours.sendall(child.frame((queue, tasks, "", None)))
        wait_for(lambda: client.llen(f"test:chunk-started:{queue}"), timeout=30, message="the call to start")
        for t in (*tasks, task(0)):  # the last is not of the chunk: nothing to mark
            ours.sendall(child.frame(("cancel", t.id)))
        assert read()[0] == "ok"  # it stops waiting once every task of its chunk says cancelled
        assert chunks(client, queue)[0]["cancelled"] == [t.id for t in tasks]
        ours.sendall(child.frame(("cancel", tasks[0].id)))  # too late: skipped
        ours.sendall(child.frame((queue, ChunkTasks([task(0, pad="x" * 5_000_000)]), "", None)))  # a 5 MB frame
        assert read()[0] == "ok"
        assert [r["cancelled"] for r in chunks(client, queue)] == [[t.id for t in tasks], []]
    finally:
        stream.close()
        ours.close()  # the process reads the end of its socket and exits
        os.waitpid(pid, 0)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"chunk": 0}, "chunk must be an integer from 1 to 1000"),
        ({"chunk": 1001}, "chunk must be an integer from 1 to 1000"),
        ({"chunk": True}, "chunk must be an integer from 1 to 1000"),
        ({"chunk_wait": 1.0}, "chunk_wait needs chunk"),
        ({"chunk": 10, "chunk_wait": -1}, "chunk_wait must be a number of seconds from 0 to 3600"),
    ],
)
def test_bad_chunk_options_are_refused(options, message):
    """A bad chunk option raises ConfigurationError naming the queue, and registers nothing."""
    with pytest.raises(ConfigurationError, match=message) as caught:
        handler("chunk-bad", **options)(lambda tasks: None)
    assert "'chunk-bad'" in str(caught.value)


def test_chunk_failed_says_its_first_failure():
    """Raised by a one-task handler (not a chunk's), its message still says what failed."""
    assert (
        str(ChunkFailed({"t1": ValueError("bad row")}))
        == "1 task(s) of the chunk failed (the first, t1: ValueError: bad row)"
    )
    assert str(ChunkFailed({})) == "0 task(s) of the chunk failed"


def test_chunk_failed_takes_a_dict_of_ids_to_exceptions():
    """ChunkFailed refuses anything but {task id: Exception instance}: no class, no KeyboardInterrupt, no CancelledError."""
    assert ChunkFailed({"a": ValueError("x")}).failures["a"].args == ("x",)
    for bad in (["a"], {"a": "x"}, {1: ValueError()}, {"a": ValueError}, {"a": KeyboardInterrupt()}):
        with pytest.raises(TypeError, match="an instance of Exception"):
            ChunkFailed(bad)
    with pytest.raises(TypeError):  # would read as a cancel of that task
        ChunkFailed({"a": asyncio.CancelledError()})
