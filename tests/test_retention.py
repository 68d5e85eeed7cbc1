"""The record of ended tasks: what is kept when a task completes, is cancelled or fails for
good, what ``WORQR["RETENTION"]`` accepts, and the pruning's bounded steps."""

import asyncio

import pytest

from queues import Queue
from queues.engine import commands, history, keys, readmodel
from queues.engine.config import Config
from queues.engine.errors import ConfigurationError
from queues.engine.retention import Retention
from queues.engine.worker.duties.history import HistoryPruning
from tests.engine_calls import fail, take


def _finish(client, task, worker="w"):
    commands.finish(task.queue, worker, [(task.id, task.lease, "", False)], result_ttl=0).run(client)


def test_a_completed_task_keeps_its_record(client):
    """Its hash goes; its record has the state, payload, attempt, worker, timings and last log lines."""
    tid = Queue("rt1").enqueue("hello", retries=2, timeout=30)
    (task,) = take(client, "rt1", worker="w-7")
    lines = [f"line {i}" for i in range(30)]
    commands.progress("rt1", [(task.id, task.lease, 0.5, "half", lines)]).run(client)
    _finish(client, task, worker="w-7")
    assert readmodel.task(client, tid) is None
    ended = readmodel.ended_task(client, tid)
    assert ended.task.state == "completed"
    assert ended.task.payload == "hello"
    assert ended.task.worker == "w-7" and ended.task.attempt == 1
    assert ended.task.retries == 2 and ended.task.timeout == 30
    assert ended.task.finished_at is not None and ended.task.started_at is not None
    assert ended.task.progress_value == 0.5 and ended.task.progress_message == "half"
    assert ended.log == lines[-keys.HISTORY_LOG_LINES :] and ended.log_total == 30
    assert [e.task.id for e in readmodel.ended_tasks(client, "rt1", "completed")] == [tid]


def test_a_cancelled_task_and_a_failed_one_keep_theirs(client):
    """Cancelled pending: recorded cancelled; failed for good then deleted: kept as failed; deleted pending: none."""
    q = Queue("rt2")
    cancelled, failing, deleted = q.enqueue_many(["c", "f", "d"])
    assert q.cancel(cancelled)
    take(client, "rt2")  # 'c' is skipped: 'f' is taken
    (task,) = [t for t in [readmodel.task(client, failing)] if t]
    fail(client, task, error="ValueError: bad")
    assert readmodel.ended_task(client, cancelled).task.state == "cancelled"
    assert readmodel.ended_task(client, failing).task.state == "failed"
    q.delete(failing)
    q.delete(deleted)
    rec = readmodel.ended_task(client, failing)
    assert rec.task.state == "failed" and rec.task.error == "ValueError: bad"
    assert readmodel.ended_task(client, deleted) is None
    assert readmodel.ended_counts(client, "rt2") == {"completed": 0, "cancelled": 1, "failed": 1}


def test_payloads_long_or_binary_are_kept_as_given_up_to_the_limit(client):
    """Binary payloads come back byte for byte; a long one is cut at 4,096 bytes with its size kept."""
    q = Queue("rt3")
    blob = bytes(range(256)) * 3
    long_text = "é" * 5000
    ids = [q.enqueue(blob), q.enqueue(long_text), q.enqueue("p" * 500)]
    for task in take(client, "rt3", count=3):
        _finish(client, task)
    a, b, c = (readmodel.ended_task(client, i) for i in ids)
    assert a.task.payload == blob and a.payload_size is None
    assert b.payload_size == len(long_text.encode()) and len(b.task.payload.encode("utf-8", "surrogateescape")) == 4096
    assert c.task.payload == "p" * 500


@pytest.mark.parametrize(
    "raw, message",
    [
        ("24h", "must be a dict"),
        ({"completed": "1 week"}, "completed"),
        ({"failed": -1}, "between 0 and 366 days"),
        ({"max_per_queue": 1.5}, "max_per_queue"),
        ({"kept": "1h"}, "unknown key"),
        ({"queues": {"bad name!": {}}}, "queue name"),
        ({"queues": {"a": {"queues": {}}}}, "unknown key"),
    ],
)
def test_bad_retention_settings_are_refused_clearly(raw, message):
    """Each bad RETENTION is a ConfigurationError naming what is wrong."""
    with pytest.raises(ConfigurationError, match=message):
        Config.from_mapping({"RETENTION": raw})


def test_retention_defaults_and_per_queue_overrides():
    """Defaults as the issue gives them; a queue's own settings take the others' for what they leave out."""
    r = Config.from_mapping({"RETENTION": {"completed": "2h", "queues": {"reports": {"failed": "30d"}}}}).retention
    assert (r.completed, r.cancelled, r.failed, r.max_per_queue) == (7200, 86400, 7 * 86400, 100_000)
    own = r.for_queue("reports")
    assert (own.completed, own.failed) == (7200, 30 * 86400)
    assert r.for_queue("other") is r
    assert Config().retention == Retention()


def test_pruning_by_age_then_by_count(client):
    """Records past their outcome's retention go; then the oldest beyond max_per_queue."""
    q = Queue("rt4")
    ids = q.enqueue_many([str(i) for i in range(6)])
    tasks = take(client, "rt4", count=6)
    for t in tasks[:4]:
        _finish(client, t)
    for t in tasks[4:]:
        fail(client, t)
    now = readmodel.server_ms(client)
    keep_failed = Retention(completed=0, failed=3600)
    removed, more = history.prune(client, "rt4", keep_failed, now_ms=now + 1000)
    assert (removed, more) == (4, False)
    assert readmodel.ended_counts(client, "rt4") == {"completed": 0, "cancelled": 0, "failed": 2}
    removed, _ = history.prune(client, "rt4", Retention(max_per_queue=1), now_ms=now + 1000)
    assert removed == 1
    (left,) = readmodel.ended_tasks(client, "rt4", "failed")
    assert left.task.id in {t.id for t in tasks[4:]} and set(ids) >= {left.task.id}
    assert client.hlen(keys.queue_key("rt4", "history")) == 1


def test_pruning_200000_records_never_holds_redis_up_for_50_ms(client):
    """200,000 records past their time: each call removes at most PRUNE_STEP and takes under 50 ms by SLOWLOG."""
    # Redis's own measure of each call (SLOWLOG: microseconds spent in the command), whatever the
    # machine's load does to the caller's clock.
    queue, n = "rt5", 200_000
    hist = keys.queue_key(queue, "history")
    index = keys.history_index(queue, "completed")
    record = '{"c":"1","s":"completed","fin":"1","p":"' + "x" * 100 + '"}'
    for start in range(0, n, 10_000):
        p = client.pipeline(transaction=False)
        chunk = [f"{queue}-{i:016x}" for i in range(start, start + 10_000)]
        p.hset(hist, mapping=dict.fromkeys(chunk, record))
        p.zadd(index, {tid: 1_000 + i for i, tid in enumerate(chunk, start)})
        p.execute()
    assert client.zcard(index) == n
    old = client.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    longest, calls, removed = 0, 0, 0
    try:
        more = True
        while more:
            got, more = history.prune(client, queue, Retention(completed=60), calls_max=1)
            assert 0 < got <= history.PRUNE_STEP
            removed += got
            calls += 1
            for entry in client.slowlog_get(128):
                if entry["command"].split()[0].upper() in (b"EVALSHA", b"EVAL", b"FCALL"):
                    longest = max(longest, entry["duration"])
            client.slowlog_reset()
    finally:
        client.config_set("slowlog-log-slower-than", old)
    assert removed == n and calls == n // history.PRUNE_STEP
    assert client.exists(hist, index) == 0
    print(f"pruned {n} records in {calls} calls; longest call {longest / 1000:.1f} ms (Redis's measure)")
    assert longest < 50_000, f"a pruning call took {longest} us"


def test_the_workers_duty_prunes_its_queues_when_due(client, conn):
    """The periodic duty prunes each served queue by the config's retention, once per interval."""
    q = Queue("rt6")
    q.enqueue_many(["a", "b"])
    for t in take(client, "rt6", count=2):
        _finish(client, t)
    duty = HistoryPruning(conn, Config(retention=Retention(completed=0)), ["rt6"], every=3600)
    asyncio.run(duty.run(None))
    assert readmodel.ended_counts(client, "rt6")["completed"] == 0
    q.enqueue("c")
    (t,) = take(client, "rt6")
    _finish(client, t)
    asyncio.run(duty.run(None))  # not due again yet
    assert readmodel.ended_counts(client, "rt6")["completed"] == 1
