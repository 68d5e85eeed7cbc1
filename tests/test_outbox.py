"""The transactional outbox (queues.outbox): enqueued if and only if the transaction committed,
whatever dies when; pushes idempotent by id; RedisUnavailable and durable=True outside a
transaction; the workers' relay."""

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from queues import Queue, RedisUnavailable
from queues import outbox as outbox_mod
from queues.engine import Config, Connection, commands, enqueueing, readmodel
from queues.engine.queue import new_task_id
from queues.models import OutboxTask
from queues.testing import free_port
from tests import engine_calls
from tests.conftest import ROOT, records, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class Rollback(Exception):
    pass


@pytest.fixture(autouse=True)
def _fast_path_on():
    """A test that made pushes fail leaves the fast path on for the next one (not skipped)."""
    yield
    outbox_mod._down_until = 0.0


def dead_queue(name, retry_for=0.5):
    """A Queue whose Redis is a port nobody listens on."""
    config = Config(redis_url="", enqueue_retry_for=retry_for)
    return Queue(name, connection=Connection(f"redis://127.0.0.1:{free_port()}/0", config))


def test_committed_rows_are_pushed_and_removed():
    """on_commit=True writes a row in the transaction; the commit pushes it and deletes it."""
    q = Queue("ob-commit")
    with transaction.atomic():
        ids = q.enqueue_many(["a", "b"], on_commit=True, delay=60)
        assert list(OutboxTask.objects.values_list("task_id", flat=True)) == ids
        assert q.counts()["enqueued"] == 0
    assert outbox_mod.flush() and OutboxTask.objects.count() == 0  # deleted off the request's path
    assert [q.get(i).state for i in ids] == ["delayed", "delayed"]


def test_rollback_and_savepoints_leave_nothing():
    """A rolled back transaction or savepoint leaves no row and no task; the kept one runs."""
    q = Queue("ob-rollback")
    with pytest.raises(Rollback), transaction.atomic():
        gone = q.enqueue("gone", on_commit=True)
        raise Rollback
    with transaction.atomic():
        kept = q.enqueue("kept", on_commit=True)
        with pytest.raises(Rollback), transaction.atomic():
            dropped = q.enqueue("dropped", on_commit=True)
            raise Rollback
    assert q.get(gone) is None and q.get(dropped) is None and q.get(kept).payload == "kept"
    assert outbox_mod.flush() and q.counts()["enqueued"] == 1 and OutboxTask.objects.count() == 0


def test_a_second_push_of_an_id_is_a_no_op_even_after_it_finished(client):
    """Enqueueing a given id again adds nothing: while its task exists, and after it finished."""
    q = Queue("ob-idem")
    task_id = new_task_id("ob-idem")
    assert q.enqueue_many(["x"], ids=[task_id]) == [task_id]
    assert q.enqueue_many(["x"], ids=[task_id]) == [task_id]
    [task] = engine_calls.take(client, "ob-idem")
    assert engine_calls.finish(client, task) == commands.Code.COMPLETED and q.get(task_id) is None
    assert q.enqueue_many(["x"], ids=[task_id]) == [task_id]
    assert q.get(task_id) is None and q.counts()["enqueued"] == 1


def test_relay_pushes_a_row_pushed_already_without_running_it_twice(client):
    """A row whose push went through but whose delete did not is pushed again as a no-op."""
    q = Queue("ob-twice")
    entries = outbox_mod.entries(q, ["once"], [new_task_id("ob-twice")], {})
    outbox_mod.store("default", q.name, entries)
    prepared = enqueueing.Prepared(entries[0].when, list(entries[0].options), [(b"once", "", "")])
    enqueueing.enqueue_prepared(q.connection, q.name, prepared, [entries[0].task_id])
    [task] = engine_calls.take(client, "ob-twice")
    engine_calls.finish(client, task)
    assert outbox_mod.relay_once(min_age=0) == 1
    assert OutboxTask.objects.count() == 0 and q.counts()["enqueued"] == 1 and q.get(task.id) is None


def test_redis_unreachable_raises_after_the_retry_window():
    """Outside a transaction an unreachable Redis raises RedisUnavailable after ENQUEUE_RETRY_FOR, not before ..."""
    # ... and not much after, and writes nothing to the outbox.
    q = dead_queue("ob-down", retry_for=0.6)
    start = time.monotonic()
    with pytest.raises(RedisUnavailable, match="ENQUEUE_RETRY_FOR"):
        q.enqueue("x")
    took = time.monotonic() - start
    assert 0.3 <= took < 2.5, took
    assert OutboxTask.objects.count() == 0


def test_durable_keeps_the_task_while_redis_is_unreachable():
    """durable=True returns the id at once with Redis unreachable; the relay pushes it later."""
    down = dead_queue("ob-durable", retry_for=30)
    start = time.monotonic()
    task_id = down.enqueue("kept", durable=True, delay=0)
    assert time.monotonic() - start < 15  # well inside the retry window: it never waited on Redis
    assert list(OutboxTask.objects.values_list("task_id", flat=True)) == [task_id]
    assert outbox_mod.stats()[0] == 1
    assert outbox_mod.relay_once(min_age=0) == 1  # the default connection reaches Redis
    assert Queue("ob-durable").get(task_id).payload == "kept" and outbox_mod.stats() == (0, None)


def test_bad_calls_are_refused_and_write_nothing():
    """unique with the outbox, and durable=True inside a transaction without on_commit, are errors."""
    q = Queue("ob-bad")
    with pytest.raises(ValueError, match="unique"):
        q.enqueue("x", durable=True, unique=True)
    with transaction.atomic():
        with pytest.raises(ValueError, match="on_commit"):
            q.enqueue("x", durable=True)
        with pytest.raises(ValueError, match="unique"):
            q.enqueue("x", on_commit=True, unique=True)
    assert OutboxTask.objects.count() == 0 and q.counts()["enqueued"] == 0


DIES_AFTER_COMMIT = """
import os, sys, django
django.setup()
from django.db import transaction
from django.utils import timezone
from queues import Queue
with transaction.atomic():
    transaction.on_commit(lambda: os._exit(0))  # runs first: the process dies before the push
    print(Queue("t1").enqueue("survivor", on_commit=True), flush=True)
"""


def test_a_producer_dying_after_commit_loses_nothing(client, workers):
    """The process dies between the commit and the push."""
    # a worker's relay pushes the row, and the task runs exactly once.
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings")
    out = subprocess.run([sys.executable, "-c", DIES_AFTER_COMMIT], cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    task_id = out.stdout.decode().strip()
    assert OutboxTask.objects.filter(task_id=task_id).exists() and Queue("t1").counts()["enqueued"] == 0
    workers(["t1"])
    wait_for(lambda: records(client, "t1"), 30, message="the task to run")
    wait_for(lambda: not OutboxTask.objects.exists(), 10, message="the row to be removed")
    assert [r["id"] for r in records(client, "t1")] == [task_id]
    assert Queue("t1").counts()["enqueued"] == 1


def test_durable_enqueues_while_redis_is_stopped_all_run_once(client, redis_server, workers):
    """Redis stopped, 100 durable=True enqueues (ids returned at once), Redis started."""
    # the running worker's relay pushes them within 2 s and each runs exactly once.
    workers(["t2"])
    wait_for(lambda: readmodel.workers(client), 20, message="the worker to register")
    redis_server.stop()
    q = Queue("t2")
    start = time.monotonic()
    ids = [q.enqueue(f"d{i}", durable=True) for i in range(100)]
    assert time.monotonic() - start < 60 and len(set(ids)) == 100  # no wait for Redis: only the inserts
    assert OutboxTask.objects.count() == 100
    redis_server.start()
    back = time.monotonic()
    wait_for(lambda: OutboxTask.objects.count() == 0, 10, interval=0.05, message="the relay to push the rows")
    relayed_in = time.monotonic() - back
    assert relayed_in < 2.0, relayed_in  # the bound (0.67 s measured on a quiet machine; chaos soak: <= 1.7 s)
    wait_for(lambda: len(records(client, "t2")) >= 100, 60, message="100 runs")
    assert Counter(r["id"] for r in records(client, "t2")) == Counter(ids)


# -- PostgreSQL (the alias "pg" of tests/settings.py) -------------------------------------------


def _postgres_up():
    import socket

    from django.conf import settings

    if "pg" not in settings.DATABASES:
        return False
    try:
        socket.create_connection((settings.DATABASES["pg"]["HOST"], int(settings.DATABASES["pg"]["PORT"])), 1).close()
        return True
    except OSError:
        return False


on_postgres = [
    pytest.mark.skipif(not _postgres_up(), reason="no PostgreSQL server (tests/settings.py, alias pg)"),
    pytest.mark.django_db(transaction=True, databases=["default", "pg"]),
]


@on_postgres[0]
@on_postgres[1]
def test_on_postgresql_commit_rollback_and_relay():
    """On PostgreSQL: commit pushes and removes the row, rollbacks leave nothing, a durable row written with ..."""
    # ... Redis unreachable is relayed, and the stats read the table.
    q = Queue("ob-pg")
    with transaction.atomic(using="pg"):
        kept = q.enqueue("kept", on_commit=True, using="pg")
        with pytest.raises(Rollback), transaction.atomic(using="pg"):
            q.enqueue("dropped", on_commit=True, using="pg")
            raise Rollback
        assert OutboxTask.objects.using("pg").count() == 1
    with pytest.raises(Rollback), transaction.atomic(using="pg"):
        q.enqueue("gone", on_commit=True, using="pg")
        raise Rollback
    assert outbox_mod.flush() and OutboxTask.objects.using("pg").count() == 0
    assert q.counts()["enqueued"] == 1 and q.get(kept)
    late = dead_queue("ob-pg").enqueue("late", durable=True, using="pg")
    assert outbox_mod.stats("pg")[0] == 1 and outbox_mod.stats("pg")[1] >= 0
    assert outbox_mod.relay_once("pg", min_age=0) == 1 and q.get(late).payload == "late"
    assert outbox_mod.stats("pg") == (0, None)


DIES_AFTER_COMMIT_PG = (
    DIES_AFTER_COMMIT.replace("transaction.atomic()", 'transaction.atomic(using="pg")')
    .replace("on_commit=True)", 'on_commit=True, using="pg")')
    .replace("os._exit(0))", 'os._exit(0), using="pg")')
)


@on_postgres[0]
@on_postgres[1]
def test_on_postgresql_a_producer_dying_after_commit_loses_nothing(client, workers):
    """On PostgreSQL: the producer dies after the commit."""
    # a worker's relay pushes the row and the task runs exactly once.
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings")
    script = DIES_AFTER_COMMIT_PG
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    task_id = out.stdout.decode().strip()
    assert OutboxTask.objects.using("pg").filter(task_id=task_id).exists()
    workers(["t1"], env={"WORQR_TEST_OUTBOX_DATABASES": "default,pg"})
    wait_for(lambda: records(client, "t1"), 30, message="the task to run")
    wait_for(lambda: not OutboxTask.objects.using("pg").exists(), 10, message="the row to be removed")
    assert [r["id"] for r in records(client, "t1")] == [task_id]


def test_outbox_size_and_age_on_the_overview_and_in_metrics():
    """Rows left in the outbox show on the dashboard overview and as /metrics gauges."""
    from django.contrib.auth.models import User
    from django.test import Client
    from prometheus_client.parser import text_string_to_metric_families

    User.objects.create_superuser("root", password="pw")
    web = Client()
    assert web.login(username="root", password="pw")
    dead_queue("ob-seen").enqueue_many(["a", "b", "c"], durable=True)
    OutboxTask.objects.update(created=timezone.now() - timedelta(seconds=90))
    page = web.get("/queues/").content.decode()
    assert "in the outbox, oldest 9" in page and '<span class="wq-n">3</span><span>in the outbox' in page
    text = web.get("/metrics").content.decode()
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["worqr_outbox_size"] == 3 and 90 <= samples["worqr_outbox_oldest_age_seconds"] < 120
    assert outbox_mod.relay_once() == 3
    samples = {
        s.name: s.value for f in text_string_to_metric_families(web.get("/metrics").content.decode()) for s in f.samples
    }
    assert samples["worqr_outbox_size"] == 0 and samples["worqr_outbox_oldest_age_seconds"] == 0


def test_remembered_ids_are_forgotten_after_the_window(client):
    """The enqueue script forgets remembered ids older than the window (bounded per call), after which the set ..."""
    # ... no longer holds them.
    from queues.engine import keys

    first = new_task_id("ob-window")
    commands.enqueue("ob-window", [(first, b"x", "", "")], remember=0.05).run(client)
    seen = keys.queue_key("ob-window", "seen")
    assert client.zscore(seen, first) is not None

    def forgotten():
        commands.enqueue("ob-window", [(new_task_id("ob-window"), b"y", "", "")], remember=0.05).run(client)
        return client.zscore(seen, first) is None

    wait_for(forgotten, 5, interval=0.05, message="the first id to be forgotten")


def test_bad_outbox_settings_are_refused():
    """ENQUEUE_RETRY_FOR, ENQUEUE_DEDUP_FOR and OUTBOX_DATABASES out of range are clear errors."""
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from queues.engine.errors import ConfigurationError

    for bad in ({"ENQUEUE_RETRY_FOR": -1}, {"ENQUEUE_RETRY_FOR": 301}, {"ENQUEUE_DEDUP_FOR": 5}):
        with pytest.raises(ConfigurationError, match="ENQUEUE_"):
            Config.from_mapping(bad)
    with override_settings(WORQR={"OUTBOX_DATABASES": ["nope"]}):
        with pytest.raises(ImproperlyConfigured, match="OUTBOX_DATABASES"):
            outbox_mod.databases()
        from queues.checks import check_worqr_settings

        assert any("OUTBOX_DATABASES" in e.msg for e in check_worqr_settings(None))


class _Kept(logging.Handler):
    """Keeps the records of a logger whose records don't propagate (worqr's)."""

    def __init__(self, logger):
        super().__init__(logging.DEBUG)
        self.logger, self.records = logging.getLogger(logger), []

    def emit(self, record):
        self.records.append(record)

    def __enter__(self):
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)


def test_concurrent_producers_and_the_deleter_on_sqlite():
    """Four threads commit read-then-write transactions with on_commit enqueues on SQLite while the deleter deletes."""
    # no producer sees "database is locked", every task is in Redis once, the outbox ends empty and nothing is logged.
    from django.db import connections

    from queues.models import AuditLog

    assert connections["default"].vendor == "sqlite"
    q, threads, per_thread = Queue("ob-sqlite"), 4, 60
    ids, errors = [], []

    def produce(n):
        try:
            for i in range(per_thread):
                with transaction.atomic():
                    AuditLog.objects.filter(action="ob").exists()  # a read first: the lock upgrade case
                    AuditLog.objects.create(action="ob", detail=f"{n}-{i}")
                    ids.append(q.enqueue(f"{n}-{i}", on_commit=True))
        except Exception as exc:
            errors.append(repr(exc))
        finally:
            connections.close_all()

    with _Kept("worqr.outbox") as log:
        producers = [threading.Thread(target=produce, args=(n,)) for n in range(threads)]
        for t in producers:
            t.start()
        for t in producers:
            t.join(120)
        assert outbox_mod.flush(30)
    assert errors == []
    assert len(set(ids)) == threads * per_thread and AuditLog.objects.filter(action="ob").count() == len(ids)
    assert q.counts()["enqueued"] == len(ids) and all(q.get(i).state == "pending" for i in ids)
    assert OutboxTask.objects.count() == 0
    assert [r.getMessage() for r in log.records if r.levelno >= logging.WARNING] == []


@on_postgres[0]
@on_postgres[1]
def test_on_postgresql_a_payload_over_the_limit_is_refused_and_1_mib_round_trips():
    """On PostgreSQL: a 5 MB payload is refused at the call with an error naming MAX_PAYLOAD_BYTES and writes no ..."""
    # ... row (the transaction goes on); a 1 MiB binary payload of every byte value, kept in the outbox while Redis is
    # unreachable, comes out of the relay byte for byte.
    from queues.engine.errors import PayloadTooLarge

    q = Queue("ob-pg-big")
    limit = q.connection.config.max_payload_bytes
    assert limit == 1024 * 1024
    with transaction.atomic(using="pg"):
        with pytest.raises(
            PayloadTooLarge, match=r"payload of 5000000 bytes is over the limit of 1048576 bytes.*MAX_PAYLOAD_BYTES"
        ):
            q.enqueue(b"x" * 5_000_000, on_commit=True, using="pg")
        small = q.enqueue(b"small", on_commit=True, using="pg")
    with pytest.raises(PayloadTooLarge, match="MAX_PAYLOAD_BYTES"):
        dead_queue("ob-pg-big").enqueue(b"x" * (limit + 1), durable=True, using="pg")
    assert outbox_mod.flush() and OutboxTask.objects.using("pg").count() == 0 and q.get(small).payload == b"small"

    data = bytes(range(256)) * (limit // 256)
    assert len(data) == limit
    task_id = dead_queue("ob-pg-big").enqueue(data, durable=True, using="pg")
    [row] = OutboxTask.objects.using("pg").all()
    assert bytes(row.payload) == data and row.task_id == task_id
    assert outbox_mod.relay_once("pg", min_age=0) == 1
    task = q.get(task_id)
    assert isinstance(task.payload, bytes) and task.payload == data
    assert OutboxTask.objects.using("pg").count() == 0


def _hold_sqlite_write_lock():
    """A connection of the test's own holding SQLite's write lock (BEGIN IMMEDIATE): every other
    writer waits for it (a long transaction elsewhere)."""
    import sqlite3

    from django.conf import settings

    locker = sqlite3.connect(
        settings.DATABASES["default"]["NAME"], isolation_level=None, timeout=10, check_same_thread=False
    )
    locker.execute("BEGIN IMMEDIATE")
    return locker


def _run_all_then_push_again(client, workers, ids):
    """With the rows of ``ids`` (queue t1) still in the outbox: a worker runs every task while its
    relay's delete waits for a long transaction, and is killed (SIGKILL); then another worker's
    relay pushes the rows again, after every task finished. Each must have run exactly once."""
    q = Queue("t1")
    locker = _hold_sqlite_write_lock()
    try:
        runner = workers(["t1"])
        wait_for(lambda: q.counts()["completed"] == len(ids), 60, message="every task to run")
        assert OutboxTask.objects.count() == len(ids)  # its relay pushed them; its delete waits
        runner.kill()
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert OutboxTask.objects.count() == len(ids)
    workers(["t2"])  # serves another queue: only its relay matters
    wait_for(lambda: not OutboxTask.objects.exists(), 30, message="the second relay to push and delete the rows")
    assert q.counts()["enqueued"] == len(ids) and q.counts()["pending"] == 0  # the second push added nothing
    # A worker of t1 runs a sentinel enqueued behind them: anything the second push queued again
    # (by any road) would have run before it.
    workers(["t1"])
    sentinel = q.enqueue("sentinel")
    wait_for(lambda: sentinel in {r["id"] for r in records(client, "t1")}, 30, message="the sentinel to run")
    assert Counter(r["id"] for r in records(client, "t1")) == Counter([*ids, sentinel])


def test_a_worker_killed_while_its_relay_holds_rows_loses_nothing(client, workers):
    """A worker's relay has pushed 50 rows whose delete waits for a long transaction."""
    # killed (SIGKILL) there, it loses nothing: the next relays push the rows again as no-ops, even after the tasks
    # finished, and every task runs exactly once.
    q = Queue("t1")
    payloads = [f"k{i}" for i in range(50)]
    ids = [new_task_id("t1") for _ in payloads]
    outbox_mod.store("default", "t1", outbox_mod.entries(q, payloads, ids, {}))  # as if Redis was down
    locker = _hold_sqlite_write_lock()
    try:
        first = workers(["t2"])  # its relay watches every queue's rows; it serves another queue
        wait_for(lambda: q.counts()["enqueued"] == 50, 30, message="the first worker's relay to push")
        # pushed: its delete comes next, and cannot pass the lock (SQLite's busy timeout is 20 s)
        assert OutboxTask.objects.count() == 50 and first.proc.poll() is None
        first.kill()
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert OutboxTask.objects.count() == 50  # pushed, never deleted
    _run_all_then_push_again(client, workers, ids)


PRODUCER_HOLDS_ROWS = """
import django, time
django.setup()
from django.db import transaction
from queues import Queue, outbox
outbox.COALESCE = 60  # the deleter holds the pushed rows a minute before deleting them
with transaction.atomic():
    ids = Queue("t1").enqueue_many([f"p{i}" for i in range(50)], on_commit=True)
print(" ".join(ids), flush=True)
time.sleep(120)
"""


def test_a_producer_killed_while_its_deleter_holds_rows_loses_nothing(client, workers):
    """A producer committed and pushed 50 tasks and is killed (SIGKILL) before its deleter removed the rows."""
    # the workers' relays push them again as no-ops, even after the tasks finished, and every task runs exactly once.
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings")
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER_HOLDS_ROWS], cwd=ROOT, env=env, stdout=subprocess.PIPE)
    try:
        ids = producer.stdout.readline().decode().split()
        assert len(ids) == 50
        wait_for(lambda: Queue("t1").counts()["enqueued"] == 50, 10, message="the fast path's push")
        assert OutboxTask.objects.count() == 50
        producer.kill()
        producer.wait(10)
    finally:
        if producer.poll() is None:
            producer.kill()
        producer.stdout.close()
    _run_all_then_push_again(client, workers, ids)


def test_a_delete_refused_by_a_locked_sqlite_database_is_retried_quietly():
    """With SQLite's write lock held longer than the busy timeout, the delete of pushed rows waits and succeeds ..."""
    # ... once the lock goes (nothing logged above debug); without time to retry it keeps the rows for the relay and
    # says so.
    from django.db import connection

    q = Queue("ob-locked")
    ids = [new_task_id("ob-locked") for _ in range(3)]
    outbox_mod.store("default", q.name, outbox_mod.entries(q, ["a", "b", "c"], ids, {}))
    options = connection.settings_dict["OPTIONS"]
    saved = dict(options)
    connection.close()
    options["timeout"] = 0.1  # this connection gives up on the lock after 0.1 s
    locker = _hold_sqlite_write_lock()
    releaser = threading.Timer(1.0, lambda: locker.execute("ROLLBACK"))
    try:
        with _Kept("worqr.outbox") as log:
            assert outbox_mod.delete("default", ids[:1]) is False  # no retry: left to the relay
            assert [r.levelno for r in log.records] == [logging.WARNING]
            assert "locked" in log.records[0].getMessage()
            log.records.clear()
            releaser.start()
            start = time.monotonic()
            assert outbox_mod.delete("default", ids, retry_for=10) is True
            assert 0.8 < time.monotonic() - start < 5  # retried past the 0.1 s busy timeout
        assert [r.getMessage() for r in log.records if r.levelno > logging.DEBUG] == []
    finally:
        releaser.cancel()
        if locker.in_transaction:
            locker.execute("ROLLBACK")
        locker.close()
        connection.close()
        options.clear()
        options.update(saved)
    assert OutboxTask.objects.count() == 0


def _rows(using):
    return list(
        OutboxTask.objects.using(using).order_by("seq").values_list("task_id", "queue", "payload", "spec", "created")
    )


@pytest.mark.parametrize(
    "using",
    [
        pytest.param("default", marks=pytest.mark.django_db(transaction=True)),
        pytest.param("pg", marks=on_postgres),
    ],
)
def test_the_driver_insert_writes_what_django_writes_and_instrumentation_sees_it(using):
    """The fast INSERT through the driver's cursor stores rows equal to the ones written through Django's cursor ..."""
    # ... (binary payload, spec, time); a duplicate id is Django's IntegrityError and leaves the transaction's other
    # rows; with an execute wrapper installed (instrumentation) the INSERT goes through Django and the wrapper sees it.
    from django.db import IntegrityError, connections

    connection = connections[using]
    q = Queue("ob-driver")
    payload = bytes(range(256)).decode("latin-1")
    seen = []

    def watch(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with transaction.atomic(using=using):
        fast = q.enqueue_many([payload, "b"], on_commit=True, using=using, delay=60)
        with connection.execute_wrapper(watch):
            slow = q.enqueue_many([payload, "b"], on_commit=True, using=using, delay=60)
        rows = _rows(using)
    assert [r[0] for r in rows] == fast + slow
    assert len([s for s in seen if "INSERT" in s and "outbox" in s]) == 1  # only the watched one
    for a, b in zip(rows[:2], rows[2:], strict=True):
        assert (bytes(a[2]), a[1], abs(a[4] - b[4]) < timedelta(seconds=5)) == (bytes(b[2]), b[1], True)
        spec_a, spec_b = json.loads(a[3]), json.loads(b[3])
        assert abs(int(spec_a.pop("w")[1:]) - int(spec_b.pop("w")[1:])) < 5000 and spec_a == spec_b
    assert outbox_mod.flush()
    assert [q.get(i).payload for i in fast + slow] == [payload, "b", payload, "b"]
    with transaction.atomic(using=using):
        outbox_mod.store(using, "ob-driver", [outbox_mod.Entry("ob-driver:dup1", b"x", "", "", "", ())])
        with pytest.raises(IntegrityError), transaction.atomic(using=using):
            outbox_mod.store(using, "ob-driver", [outbox_mod.Entry("ob-driver:dup1", b"y", "", "", "", ())])
        assert [r[0] for r in _rows(using)] == ["ob-driver:dup1"]
    OutboxTask.objects.using(using).all().delete()


def test_after_with_on_commit_or_durable_is_refused_before_anything_is_written():
    """after= with on_commit=True in a transaction, or durable=True: InvalidInput naming them; no row, no task."""
    # It crashed with a TypeError from the enqueue's option check (after= unexpected), in the caller's transaction.
    from queues.engine.errors import InvalidInput

    parent = Queue("ob-after-p").enqueue("p")
    q = Queue("ob-after")
    with transaction.atomic():
        with pytest.raises(InvalidInput, match=r"after= cannot be combined with on_commit=True .* durable=True"):
            q.enqueue("c", after=[parent], on_commit=True)
        with pytest.raises(InvalidInput, match="after="):
            q.enqueue_many(["c", "d"], after=[parent], on_commit=True, on_parent_failure="run")
        assert OutboxTask.objects.count() == 0
    with pytest.raises(InvalidInput, match="after="):
        q.enqueue("c", after=[parent], durable=True)
    assert OutboxTask.objects.count() == 0 and q.counts()["enqueued"] == 0
    child = q.enqueue("c", after=[parent], on_commit=True)  # no transaction open: enqueued now
    assert q.get(child).state == "blocked"
    assert q.get(q.enqueue("e", after=[], durable=True)).state == "pending"  # no parents: as before
    assert outbox_mod.flush() and OutboxTask.objects.count() == 0
