"""Tags (indexed per queue), task.progress / task.log (sync, async, isolated), worker stats and
the list of gone workers."""

import json
import signal
import time

import pytest

from queues import Queue
from queues.engine import commands, keys, readmodel, upkeep
from queues.engine.codes import Code
from queues.engine.errors import InvalidInput, InvalidTask
from queues.engine.task import Task
from tests.conftest import wait_for, wait_registered
from tests.support.api import Api, make_token


def tag_keys(client, queue):
    return sorted(k.decode() for k in client.scan_iter(match=f"worqr:{{{queue}}}:tag:*"))


def log_keys(client, queue):
    return sorted(k.decode() for k in client.scan_iter(match=f"worqr:{{{queue}}}:log:*"))


# -- tags ---------------------------------------------------------------------------------------


def test_tags_are_indexed_and_read_in_order(client, conn):
    """Tasks enqueued with tags are found by tag, newest first, and carry their tags."""
    q = Queue("tg1", conn)
    a = q.enqueue("a", tags=["customer:42", "invoice"])
    time.sleep(0.002)  # the index orders by enqueue time (ms): two in one ms tie
    b = q.enqueue("b", tags=["customer:42"])
    q.enqueue("c")
    found = [t.id for t in readmodel.tagged(client, "tg1", "customer:42")]
    assert found == [b, a]  # newest first
    assert [t.id for t in readmodel.tagged(client, "tg1", "invoice")] == [a]
    assert readmodel.tagged_count(client, "tg1", "customer:42") == 2
    assert q.get(a).tags == ["customer:42", "invoice"]
    assert q.get(a).as_dict()["tags"] == ["customer:42", "invoice"]
    assert q.get(b).as_dict()["progress"] is None


@pytest.mark.parametrize(
    "tags",
    ["customer:42", ["ok", ""], ["bad\nline"], [1], ["x" * (keys.TAG_MAX + 1)], [f"t{i}" for i in range(21)]],
)
def test_bad_tags_are_refused_and_write_nothing(client, conn, tags):
    """Each malformed tags option raises InvalidTask and adds nothing to Redis."""
    with pytest.raises(InvalidTask):
        Queue("tg2", conn).enqueue("a", tags=tags)
    assert client.keys("worqr:{tg2}:*") == []


def test_tag_index_never_outlives_its_tasks(client, conn):
    """Deleting, cancelling, purging, completing and dropping take ids out of the tag index."""
    q = Queue("tg3", conn)
    deleted = q.enqueue("d", tags=["x"])
    cancelled = q.enqueue("c", tags=["x", "y"], delay=60)
    q.enqueue("p", tags=["y"])
    assert tag_keys(client, "tg3") == ["worqr:{tg3}:tag:x", "worqr:{tg3}:tag:y"]
    q.delete(deleted)
    q.cancel(cancelled)
    assert tag_keys(client, "tg3") == ["worqr:{tg3}:tag:y"]
    assert q.purge() == 1
    assert tag_keys(client, "tg3") == []
    # completed (with and without a kept result), and a queue dropped with tasks in every state
    for kept in ("", "result"):
        tid = q.enqueue("run", tags=["z"])
        commands.register("tg3", "w1", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
        started = commands.start("tg3", "w1", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client)
        task = started.tasks[0]
        assert task.id == tid
        codes = commands.finish("tg3", "w1", [(tid, task.lease, kept, False)], result_ttl=60).run(client)
        assert codes == [Code.COMPLETED]
        assert tag_keys(client, "tg3") == []
    q.enqueue_many(["1", "2", "3"], tags=["many"])
    q.enqueue("later", tags=["many"], delay=60)
    q.drop()
    assert tag_keys(client, "tg3") == [] and log_keys(client, "tg3") == []


def test_failed_tasks_keep_their_tags_until_deleted(client, conn):
    """A failed task stays in the tag index (it can be found and retried), until deleted."""
    q = Queue("tg4", conn)
    tid = q.enqueue("x", tags=["keep"], retries=0)
    commands.register("tg4", "w1", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
    task = commands.start("tg4", "w1", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client).tasks[0]
    fail = commands.fail(
        "tg4", "w1", tid, task.lease, "E", "", retries=0, backoff=0, backoff_max=0, jitter=0, history=5
    )
    assert fail.run(client) == Code.FAILED
    assert [t.id for t in readmodel.tagged(client, "tg4", "keep")] == [tid]
    q.retry(tid)
    assert [t.state for t in readmodel.tagged(client, "tg4", "keep")] == ["pending"]
    q.delete(tid)
    assert tag_keys(client, "tg4") == []


# -- progress and log, through the script -----------------------------------------------------


def _started(client, queue, payload="x", **options):
    tid = Queue(queue).enqueue(payload, **options)
    commands.register(queue, "w1", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
    task = commands.start(queue, "w1", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client).tasks[0]
    assert task.id == tid
    return task


def test_progress_is_fenced_by_the_lease_and_the_log_is_a_ring(client, conn):
    """Reports of the current lease are kept (the log trimmed to 1,000 lines); others are STALE."""
    task = _started(client, "pg1")
    lines = [f"line {i}" for i in range(1200)]
    codes = commands.progress("pg1", [(task.id, task.lease, 0.5, "half", lines)]).run(client)
    assert codes == [Code.OK]
    got = readmodel.task(client, task.id)
    assert (got.progress_value, got.progress_message) == (0.5, "half")
    log = readmodel.task_log(client, task.id)
    assert len(log) == keys.TASK_LOG_MAX and log[0] == "line 200" and log[-1] == "line 1199"
    stale = commands.progress("pg1", [(task.id, task.lease + 1, 0.9, "", ["late"])]).run(client)
    assert stale == [Code.STALE]
    assert readmodel.task_log(client, task.id)[-1] == "line 1199"
    assert readmodel.task(client, task.id).progress_value == 0.5


def test_progress_is_published_for_dashboards(client, conn):
    """A report is one 'progress' event on the queue's channel, with the last lines."""
    task = _started(client, "pg2")
    pubsub = client.pubsub()
    pubsub.subscribe(keys.queue_events_channel("pg2"))
    wait_for(lambda: pubsub.get_message(timeout=0.1), message="the subscription")
    commands.progress("pg2", [(task.id, task.lease, 0.25, "a quarter", ["hello"])]).run(client)
    message = wait_for(lambda: pubsub.get_message(timeout=0.1), message="the event")
    event = json.loads(message["data"])
    assert event["e"] == "progress" and event["q"] == "pg2"
    assert event["items"] == [{"id": task.id, "p": 0.25, "m": "a quarter", "lines": ["hello"], "n": 1}]
    pubsub.close()


def test_task_methods_check_their_input():
    """progress() wants a number from 0 to 1 and a string; log() a string."""
    t = Task(id="q-0000000000000000", queue="q")
    for bad in (-0.1, 1.5, "0.5", True, float("nan")):
        with pytest.raises(InvalidInput):
            t.progress(bad)
    with pytest.raises(InvalidInput):
        t.progress(0.5, 3)
    with pytest.raises(InvalidInput):
        t.log(None)
    t.progress(1, "done")  # no worker: kept on the object only
    assert (t.progress_value, t.progress_message) == (1.0, "done")


# -- progress and log from real handlers --------------------------------------------------------


def _gate(client, tid):
    client.rpush(f"test:gate:{tid}", 1)


@pytest.mark.parametrize("queue", ["prog", "aprog", "pprog"])
def test_handlers_report_progress_and_log_live(client, conn, workers, queue):
    """Sync, async and isolated handlers' progress and lines show while the task runs."""
    # the log goes when the task completes.
    workers([queue], name=f"w-{queue}")
    tid = Queue(queue, conn).enqueue(json.dumps({"steps": 2, "gate": True}), tags=["live"])
    wait_for(lambda: (t := readmodel.task(client, tid)) and t.state == "active", 30, message="the task to start")
    _gate(client, tid)
    wait_for(lambda: readmodel.task(client, tid).progress_value == 0.5, 15, message="progress 0.5")
    assert readmodel.task(client, tid).progress_message == "did 1 of 2"
    assert readmodel.task_log(client, tid) == ["step 1 of 2"]
    _gate(client, tid)
    wait_for(lambda: readmodel.task(client, tid) is None, 15, message="the task to complete")
    assert log_keys(client, queue) == [] and tag_keys(client, queue) == []


def test_a_failed_task_keeps_its_log(client, conn, workers):
    """Lines logged just before a handler raises stay with the failed task."""
    workers(["prog"], name="w-fail")
    tid = Queue("prog", conn).enqueue(json.dumps({"steps": 3, "fail": True}))
    wait_for(lambda: (t := readmodel.task(client, tid)) and t.state == "failed", 30, message="the task to fail")
    assert readmodel.task_log(client, tid) == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert readmodel.task(client, tid).progress_value == 1.0
    Queue("prog", conn).delete(tid)
    assert log_keys(client, "prog") == []


# -- workers: resources, and the gone ---------------------------------------------------------


def test_heartbeat_reports_rss_and_cpu_and_gone_workers_are_listed(client, conn, workers):
    """The heartbeat carries RSS and CPU; a stopped worker and a killed one go on the gone list."""
    stopped = workers(["t1"], name="w-stop")
    killed = workers(["t2"], name="w-kill")
    workers(["t3"], name="w-witness")  # a live worker notes the killed one (no read of the workers does)
    wait_registered(client, "w-stop", 30)
    wait_registered(client, "w-kill", 30)
    wait_registered(client, "w-witness", 30)
    info = wait_for(lambda: readmodel.worker(client, "w-stop"), message="the heartbeat")
    assert info["rss_mb"] > 5 and info["cpu"] >= 0
    stopped.signal(signal.SIGTERM)
    assert stopped.wait(30) == 0
    killed.kill()

    def both_gone():
        gone = {g["name"]: g for g in readmodel.gone_workers(client)}
        return gone if {"w-stop", "w-kill"} <= set(gone) else None

    gone = wait_for(both_gone, 30, message="both workers on the gone list")
    assert gone["w-stop"]["how"] == "stopped" and gone["w-stop"]["queues"] == ["t1"]
    assert gone["w-kill"]["how"] == "reaped"
    assert gone["w-stop"]["at"] is not None


def test_a_worker_dead_alone_on_its_queue_is_recorded_once_by_the_workers_with_no_read(client, workers):
    """A worker killed alone on its queue is recorded as reaped once, by two live workers, with no read of the workers."""
    for name in ("w-see1", "w-see2"):
        workers(["t4"], name=name)  # no beat of theirs reaps w-alone: it serves another queue
    victim = workers(["t5"], name="w-alone")
    for name in ("w-see1", "w-see2", "w-alone"):
        wait_registered(client, name, 30)
    victim.kill()

    def recorded():
        return [g for g in readmodel.gone_workers(client) if g["name"] == "w-alone"]

    wait_for(recorded, 30, message="w-alone on the gone list")
    turns, last = 0, client.pttl(keys.GONE_CHECK)
    deadline = time.monotonic() + 60
    while turns < 2 and time.monotonic() < deadline:  # two more turns of the workers' check
        time.sleep(0.02)
        now = client.pttl(keys.GONE_CHECK)
        turns, last = turns + (now > last), now
    assert turns == 2, "the workers' check for dead workers stopped taking turns"
    assert [(g["name"], g["how"]) for g in recorded()] == [("w-alone", "reaped")]
    assert not client.sismember(keys.WORKER_REGISTRY, "w-alone")
    assert {g["name"] for g in readmodel.gone_workers(client)} == {"w-alone"}  # the live ones: not gone


def test_reading_the_workers_writes_nothing_and_the_check_records_a_dead_one_once(client):
    """A read leaves a dead worker registered; the workers' check records it as reaped, once, and one caller per turn."""
    client.sadd(keys.WORKER_REGISTRY, "w-dead", "w-live")
    client.set(keys.heartbeat_key("w-live"), json.dumps({"queues": ["t6"], "ttl_ms": 60000}), px=60000)
    assert [w["name"] for w in readmodel.workers(client)] == ["w-live"]
    assert readmodel.worker(client, "w-dead") is None
    assert client.smembers(keys.WORKER_REGISTRY) == {b"w-dead", b"w-live"}
    assert readmodel.gone_workers(client) == [] and client.llen(keys.GONE_WORKERS) == 0
    assert readmodel.without_heartbeat(client) == ["w-dead"]
    assert upkeep.note_gone_workers_due(client, every=60) == ["w-dead"]
    client.sadd(keys.WORKER_REGISTRY, "w-dead2")
    assert upkeep.note_gone_workers_due(client, every=60) == []  # the turn is taken for 60 s
    assert upkeep.note_gone_workers(client) == ["w-dead2"]
    assert upkeep.note_gone_workers(client) == []
    gone = readmodel.gone_workers(client)
    assert [(g["name"], g["how"]) for g in gone] == [("w-dead2", "reaped"), ("w-dead", "reaped")]
    assert client.smembers(keys.WORKER_REGISTRY) == {b"w-live"}


def test_the_gone_list_is_capped(client):
    """Only the last 100 gone workers are kept, newest first."""
    for i in range(keys.GONE_WORKERS_MAX + 5):
        upkeep.remember_gone(client, {"name": f"w{i}", "how": "stopped"})
    gone = readmodel.gone_workers(client)
    assert len(gone) == keys.GONE_WORKERS_MAX and gone[0]["name"] == f"w{keys.GONE_WORKERS_MAX + 4}"


# -- the HTTP API and the Tasks backend ---------------------------------------------------------


@pytest.mark.django_db
def test_api_takes_tags_and_shows_progress_and_log(client, conn):
    """POST /api/tasks takes tags (bad ones: 400, nothing written); GET shows tags, progress, log."""

    api = Api(make_token("all", name="admin"))
    for bad in ("x", ["a\nb"], [""], [3]):
        r = api.post("/api/tasks", {"queue": "pg3", "payload": "p", "tags": bad})
        assert r.status_code == 400 and r.json()["field"] == "tags", r.content
    assert client.keys("worqr:{pg3}:*") == []
    r = api.post("/api/tasks", {"queue": "pg3", "payload": "p", "tags": ["customer:42"]})
    assert r.status_code == 201
    tid = r.json()["id"]
    commands.register("pg3", "w1", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
    task = commands.start("pg3", "w1", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client).tasks[0]
    commands.progress("pg3", [(task.id, task.lease, 0.4, "rendered 40 of 100 pages", ["first", "second"])]).run(client)
    body = api.get(f"/api/tasks/{tid}").json()
    assert body["tags"] == ["customer:42"]
    assert body["progress"] == {"fraction": 0.4, "message": "rendered 40 of 100 pages"}
    assert body["log"] == ["first", "second"]


def test_tasks_backend_tags_option(client, settings):
    """OPTIONS["TAGS"] tags every task the backend enqueues; bad tags are a configuration error."""
    from django.core.exceptions import ImproperlyConfigured

    from queues.backends import WorqrBackend
    from tests.tasksapp import tasks

    backend = WorqrBackend(
        "tagged", {"QUEUES": ["dt-default"], "OPTIONS": {"TAGS": ["from-tasks"], "ON_COMMIT": False}}
    )
    result = backend.enqueue(tasks.add, (1, 2), {})
    assert readmodel.task(client, result.id).tags == ["from-tasks"]
    assert [t.id for t in readmodel.tagged(client, "dt-default", "from-tasks")] == [result.id]
    with pytest.raises(ImproperlyConfigured, match="TAGS"):
        WorqrBackend("bad", {"QUEUES": ["tb1"], "OPTIONS": {"TAGS": "oops"}})
    with pytest.raises(ImproperlyConfigured, match="TAGS.*unpaired surrogate"):  # at start-up, not at each enqueue
        WorqrBackend("bad", {"QUEUES": ["tb1"], "OPTIONS": {"TAGS": ["a\ud800"]}})


def test_an_outcome_waits_for_the_reports_of_its_task_already_on_their_way(client, conn):
    """flush_task (before a task's outcome) waits for the flusher's call carrying that task's reports: the outcome, on another connection, could land first."""
    import asyncio

    from queues.engine.worker.progress import ProgressSink

    task = _started(client, "pg5")

    async def scenario():
        aredis = conn.async_client()
        try:
            sink = ProgressSink(asyncio.get_running_loop(), aredis)
            sink.put(task, fraction=0.5, message="half", lines=["the last line"])
            on_its_way = asyncio.ensure_future(sink.flush())  # the flusher took them: the buffer is empty
            await asyncio.sleep(0)
            assert not sink.buffer and sink.pending(task)
            await sink.flush_task(task)  # what reporting the outcome awaits first
            assert on_its_way.done() and not sink.pending(task)
            # what the outcome's call would now find:
            return readmodel.task(client, task.id).progress_value, readmodel.task_log(client, task.id)
        finally:
            await aredis.aclose()

    assert asyncio.run(scenario()) == (0.5, ["the last line"])
