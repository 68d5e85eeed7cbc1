"""Kept results (``keep_result``): bounded by MAX_RESULT_BYTES, kept exactly or refused when they
are not text, and sent to Redis in calls of at most that many bytes; a handler's other text (its
error, progress messages, log lines) reaches Redis even with surrogates in it."""

import json
import os
import re
import socket
import threading

import pytest

from queues import Queue
from queues.engine import connection, crypto, readmodel
from queues.engine.config import Config
from queues.engine.errors import ConfigurationError
from queues.engine.readmodel import task_log
from tests.conftest import wait_for

KINDS = pytest.mark.parametrize("prefix", ["", "a", "p"], ids=["sync", "async", "isolated"])
SMALL = {"WORQR_TEST_MAX_RESULT_BYTES": "4096"}


@KINDS
def test_a_result_over_max_result_bytes_fails_its_attempt_saying_so_and_the_next_completes(client, workers, prefix):
    """A result over MAX_RESULT_BYTES (in characters, or in bytes once encoded) fails its attempt naming the bound; one under it is kept."""
    q = Queue(prefix + "results")
    chars, utf8, fine = q.enqueue("5000"), q.enqueue("é3000"), q.enqueue("4096")
    w = workers([q.name], concurrency=2, env=SMALL)
    wait_for(lambda: q.counts()["failed"] == 2 and q.counts()["completed"] == 1, timeout=30, message="the three ends")
    assert q.get(chars).error == (
        "ValueError: the handler's return value could not be kept: "
        "it is 5,000 characters, over WORQR['MAX_RESULT_BYTES'] (4,096 bytes)"
    )
    assert q.get(utf8).error == (
        "ValueError: the handler's return value could not be kept: "
        "it is 6,000 bytes, over WORQR['MAX_RESULT_BYTES'] (4,096)"
    )
    assert q.get(fine).result == b"x" * 4096
    assert w.proc.poll() is None  # the worker goes on


@KINDS
def test_a_result_with_a_lone_surrogate_fails_its_attempt_and_the_worker_goes_on(client, workers, prefix):
    """A result holding a lone surrogate fails its attempt saying where (before, the worker raised and exited); escaped bytes are kept as bytes."""
    q = Queue(prefix + "results")
    lone, escaped = q.enqueue("surrogate"), q.enqueue("escaped")
    w = workers([q.name], concurrency=2)
    wait_for(lambda: q.counts()["failed"] == 1 and q.counts()["completed"] == 1, timeout=30, message="both ends")
    assert q.get(lone).error == (
        "ValueError: the handler's return value could not be kept: "
        "it is not valid text: it holds an unpaired surrogate (U+D800) at position 1"
    )
    assert q.get(escaped).result == b"\xff\xfe"  # surrogateescape, as a payload's text is encoded
    after = q.enqueue("10")
    wait_for(lambda: q.counts()["completed"] == 2, timeout=30, message="the next task")
    assert q.get(after).result == b"x" * 10
    assert w.proc.poll() is None


@KINDS
def test_surrogates_in_an_error_a_progress_message_and_a_log_line_reach_redis_as_replacement_characters(
    client, workers, prefix
):
    """An error, a progress message and a log line with surrogates are kept with U+FFFD for each (before, the task stayed active for ever)."""
    q = Queue(prefix + "surrogates")
    plain, reported = q.enqueue("raise"), q.enqueue("report")
    w = workers([q.name], concurrency=2)
    wait_for(lambda: q.counts()["failed"] == 2, timeout=30, message="both tasks to fail")
    assert q.get(plain).error == "ValueError: bad \ufffd text"
    assert "ValueError: bad \ufffd text" in q.failures()[0]["traceback"]
    task = readmodel.task(client, reported)
    assert (task.progress_value, task.progress_message) == (0.5, "half \ufffd way")
    assert task_log(client, reported) == ["a \ufffd line \ufffd"]
    assert w.proc.poll() is None
    assert "reporter failed" not in w.output()


class Monitor(threading.Thread):
    """Every command Redis runs meanwhile, as MONITOR prints it (arguments in full), one line each."""

    def __init__(self, client):
        super().__init__(daemon=True)
        kw = client.connection_pool.connection_kwargs
        self.sock = socket.create_connection((kw["host"], kw["port"]), timeout=0.2)
        self.sock.sendall(b"MONITOR\r\n")
        self.data, self.stopping = bytearray(), threading.Event()
        self.start()

    def run(self):
        while not self.stopping.is_set():
            try:
                self.data += self.sock.recv(1 << 20)
            except TimeoutError:
                continue

    def lines(self):
        self.stopping.set()
        self.join()
        self.sock.close()
        return bytes(self.data).split(b"\r\n")


def test_a_batch_of_acknowledgements_carries_at_most_max_result_bytes_of_results(client, workers):
    """Results of 40 KB ending together go to Redis one per call under a 64 KiB bound (the first of a call always goes)."""
    q = Queue("results")
    ids = q.enqueue_many(["40000"] * 24)
    monitor = Monitor(client)
    workers(["results"], concurrency=8, env={"WORQR_TEST_MAX_RESULT_BYTES": "65536"})
    wait_for(lambda: q.counts()["completed"] == 24, timeout=60, message="24 completions")
    per_call = [line.count(b"x" * 40000) for line in monitor.lines() if b'"EVALSHA"' in line or b'"EVAL"' in line]
    assert sum(per_call) == 24 and max(per_call) == 1, per_call
    assert all(q.get(i).result == b"x" * 40000 for i in ids)


@pytest.mark.parametrize("value", [0, 1023, 256 * 1024 * 1024 + 1, 2.5, "16", True, float("nan")])
def test_max_result_bytes_must_be_a_whole_number_of_bytes_in_range(value):
    """MAX_RESULT_BYTES below 1 KiB, above 256 MiB (half of Redis's limit for one value) or not an integer is refused."""
    with pytest.raises(ConfigurationError, match="MAX_RESULT_BYTES"):
        Config.from_mapping({"MAX_RESULT_BYTES": value})


# -- an encrypted queue's results, and the Tasks backend's ------------------------------------------------


def test_an_encrypted_queue_keeps_its_results_sealed_and_the_tasks_backend_opens_them(_engine, client, workers):
    """A Tasks function's return value on an encrypted queue is sealed in Redis (for its task's result only); get_result opens it."""
    from queues.backends.framework import TaskResultStatus
    from tests.tasksapp import tasks

    key = crypto.new_key()
    conn = connection.configure(
        _engine.config.with_(encryption_keys=(key,), encrypted_queues=frozenset({"dt-default"})),
        os.environ["WORQR_REDIS_URL"],
    )
    result = tasks.add.enqueue(20, 22)
    env = {"WORQR_TEST_ENCRYPTION_KEYS": key, "WORQR_TEST_ENCRYPTED_QUEUES": "dt-default"}
    workers(["dt-default"], env=env)
    wait_for(lambda: result.refresh() or result.is_finished, timeout=30, message="the task to finish")
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == {"sum": 42, "args": [20, 22]}
    raw = conn.client.hget(f"worqr:{{dt-default}}:task:{result.id}", "res")
    assert raw.startswith(crypto.MAGIC) and b"sum" not in raw and b"42" not in raw
    task = Queue("dt-default").get(result.id)
    assert isinstance(task.result, crypto.Sealed)
    assert json.loads(crypto.open_result(conn.config, task))["value"] == {"sum": 42, "args": [20, 22]}
    with pytest.raises(crypto.PayloadUnreadable, match="its payload does not open"):  # bound to its part
        crypto.keyring(conn.config).open("dt-default", result.id, task.result)


def test_a_tasks_function_s_result_over_max_result_bytes_fails_with_the_reason(workers):
    """A Tasks function returning more than MAX_RESULT_BYTES fails, its error saying why; the worker goes on."""
    from queues.backends.framework import TaskResultStatus
    from tests.tasksapp import tasks

    big, small = tasks.big_result.enqueue(5000), tasks.add.enqueue(1, 2)
    workers(["dt-default", "dt-emails", "dt-retry"], env=SMALL)
    for r in (big, small):
        wait_for(lambda r=r: r.refresh() or r.is_finished, timeout=30, message="both tasks to finish")
    assert big.status == TaskResultStatus.FAILED
    assert big.errors[-1].exception_class is ValueError
    assert re.fullmatch(  # the refusal alone: no lines of worqr's (the JSON holds the worker's name)
        r"ValueError: the handler's return value could not be kept: "
        r"it is 5,0\d\d characters, over WORQR\['MAX_RESULT_BYTES'\] \(4,096 bytes\)\n",
        big.errors[-1].traceback,
    )
    assert small.return_value == {"sum": 3, "args": [1, 2]}


def test_a_result_kept_in_clear_on_an_encrypted_queue_reads_as_it_is(_engine, client):
    """A result an older worker kept in clear on an encrypted queue reads as it is (not as Sealed), so upgrading loses no result."""
    conn = connection.configure(
        _engine.config.with_(encryption_keys=(crypto.new_key(),), encrypted_queues=frozenset({"vault"})),
        os.environ["WORQR_REDIS_URL"],
    )
    tid = Queue("vault").enqueue("secret")
    conn.client.hset(f"worqr:{{vault}}:task:{tid}", mapping={"s": "completed", "res": '{"value": 1}'})
    task = Queue("vault").get(tid)
    assert not isinstance(task.result, crypto.Sealed) and crypto.open_result(conn.config, task) == b'{"value": 1}'
