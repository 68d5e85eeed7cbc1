"""Enqueue, read back, cancel and count: the producer side of the engine, on a real Redis."""

import subprocess
import sys

import pytest

from queues import Queue
from queues.engine import Connection, commands, keys, readmodel, task
from queues.engine.codes import Code
from queues.engine.errors import (
    InvalidInput,
    InvalidQueueName,
    InvalidState,
    InvalidTask,
    PayloadTooLarge,
    TaskNotFound,
)
from tests.engine_calls import fail, finish, take
from tests.support.api import Api, make_token


def test_enqueue_returns_ids_and_tasks_are_pending_in_fifo_order(client):
    """Ids come back in order, the tasks are pending, and the pending list is FIFO."""
    q = Queue("t1")
    ids = q.enqueue_many(["a", "b", "c"])
    assert len(set(ids)) == 3 and all(i.startswith("t1-") for i in ids)
    assert [t.payload for t in (q.get(i) for i in ids)] == ["a", "b", "c"]
    assert q.get(ids[0]).state == "pending"
    assert [i.decode() for i in client.lrange(keys.queue_key("t1", "pending"), 0, -1)] == ids
    assert q.counts()["pending"] == 3


def test_payloads_are_stored_raw_byte_for_byte(client):
    """No envelope: the hash holds exactly the producer's bytes; bytes stay bytes, text stays text."""
    q = Queue("t1")
    blob = bytes(range(256)) * 4
    text = 'héllo {"json": [1, 2]} \x00 end'
    bid, tid = q.enqueue(blob), q.enqueue(text)
    assert client.hget(keys.task_key("t1", bid), "p") == blob
    assert client.hget(keys.task_key("t1", tid), "p") == text.encode()
    assert q.get(bid).payload == blob and q.get(tid).payload == text


# Around the piece size (63), the listpack limit (64) and the largest payload kept in pieces (1,008):
# text with a multi-byte character cut by a piece boundary, bytes that are not UTF-8, 1 MiB.
ROUND_TRIP_PAYLOADS = [
    "x" * 64,
    "y" * 65,
    "é" * 50,
    "z" * 100,
    "q" * 126,
    "q" * 127,
    bytes(range(256))[::-1][:100],
    bytes(range(256)) * 3 + b"\xff" * 240,
    bytes(range(256)) * 3 + b"\xff" * 241,
    bytes(range(256)) * 20,
    b"\x00\xfe" * (512 * 1024),
]


@pytest.mark.django_db
@pytest.mark.parametrize("payload", ROUND_TRIP_PAYLOADS, ids=lambda p: f"{type(p).__name__}{len(p)}")
def test_payload_round_trips_exactly_through_start_failure_retry_and_api(client, payload):
    """Whatever its size or bytes, the handler, get, both histories and the API see exactly the payload given."""
    q = Queue("t1")
    tid = q.enqueue(payload)
    assert q.get(tid).payload == payload
    (t,) = take(client, "t1")
    assert t.payload == payload
    assert fail(client, t) == Code.FAILED
    raw = payload if isinstance(payload, bytes) else payload.encode()
    (entry,) = readmodel.failures(client, "t1")
    assert entry["payload"] == raw[:4096].decode("utf-8", "replace")  # the history keeps 4 KiB
    assert q.get(tid).state == "failed" and q.get(tid).payload == payload
    shown = Api(make_token("all")).get(f"/api/tasks/{tid}").json()
    assert shown["payload"] == raw.decode("utf-8", "replace")
    assert q.retry(tid) is True
    (again,) = take(client, "t1")
    assert again.id == tid and again.payload == payload
    assert finish(client, again) == Code.COMPLETED
    ended = readmodel.ended_task(client, tid)  # the completed record joins a payload kept in pieces
    assert ended.task.state == "completed" and ended.task.payload == (raw[:4096] if len(raw) > 4096 else payload)
    assert ended.payload_size == (len(raw) if len(raw) > 4096 else None)


def test_payload_pieces_are_raw_bytes_in_order(client):
    """A 100-byte payload is stored as two raw pieces (63 + 37 bytes), a 1,009-byte one whole."""
    q = Queue("t1")
    blob = bytes(range(100))
    small, big = q.enqueue(blob), q.enqueue("w" * 1009)
    h = client.hgetall(keys.task_key("t1", small))
    assert b"p" not in h and (h[b"1"], h[b"2"]) == (blob[:63], blob[63:]) and b"3" not in h
    assert task.payload_from_hash(h) == blob
    assert client.hget(keys.task_key("t1", big), "p") == b"w" * 1009
    assert client.hget(keys.task_key("t1", big), "1") is None


def test_pending_task_hash_stays_a_listpack_with_default_redis_settings(client):
    """With Redis's default hash-max-listpack-value (64), a task with a 100-byte payload is one compact listpack."""
    old = client.config_get("hash-max-listpack-value")["hash-max-listpack-value"]
    client.config_set("hash-max-listpack-value", 64)
    try:
        q = Queue("t1")
        tids = [q.enqueue("x" * 100), q.enqueue(b"\xff" * 1008), q.enqueue("x" * 1009)]
        encodings = [client.object("encoding", keys.task_key("t1", i)) for i in tids]
        assert encodings == [b"listpack", b"listpack", b"hashtable"]
        assert [q.get(i).payload for i in tids] == ["x" * 100, b"\xff" * 1008, "x" * 1009]
    finally:
        client.config_set("hash-max-listpack-value", old)


def test_a_pending_task_without_a_state_field_reads_and_acts_as_pending(client):
    """A pending task is stored without "s", yet reads as pending everywhere and can be cancelled or deleted, not retried."""
    q = Queue("t1")
    a, b, c = q.enqueue_many(["a", "b", "c"])
    assert client.hget(keys.task_key("t1", a), "s") is None
    assert q.get(a).state == "pending" and readmodel.task_states(client, [a, "t1-0000000000000000"]) == {
        a: "pending",
        "t1-0000000000000000": None,
    }
    assert readmodel.task_ends(client, [b]) == {b: "pending"}
    with pytest.raises(InvalidState):
        q.retry(a)
    assert q.cancel_outcome(a) == "removed" and q.delete(b) is True
    assert q.get(a) is None and q.get(b) is None
    assert [t.id for t in take(client, "t1", count=3)] == [c]


def test_cancel_pending_removes_it(client):
    """A cancelled pending task is gone from the list and the store; cancel again is False."""
    q = Queue("t1")
    a, b = q.enqueue_many(["a", "b"])
    assert q.cancel(a) is True
    assert q.get(a) is None
    assert [t.id for t in readmodel.pending(client, "t1")] == [b] and q.counts()["pending"] == 1
    assert q.cancel(a) is False
    assert q.counts()["cancelled"] == 1


@pytest.mark.parametrize("name", ["", "a b", "a{b", "a}b", "a:b", "x" * 201, "tab\tq", "new\nline", "/slash"])
def test_bad_queue_names_are_refused(client, name):
    """Empty names, braces, colons, whitespace and over-long names are clear errors."""
    with pytest.raises(InvalidQueueName):
        Queue(name)
    assert client.dbsize() == 0


def test_queue_name_of_200_characters_is_fine(client):
    """A queue name of the maximum length works end to end."""
    q = Queue("x" * 200)
    assert q.get(q.enqueue("p")).payload == "p"


def test_oversized_payload_is_refused_and_nothing_is_written(client, conn):
    """A payload over MAX_PAYLOAD_BYTES is an error naming the limit, and Redis stays empty."""
    limit = conn.config.max_payload_bytes
    q = Queue("t1")
    with pytest.raises(PayloadTooLarge, match=str(limit)):
        q.enqueue_many(["ok", "x" * (limit + 1)])
    assert client.dbsize() == 0
    q.enqueue("x" * limit)  # exactly the limit is accepted


def test_a_plain_enqueue_stores_what_enqueue_many_stores(client, conn):
    """Queue.enqueue's short path (a str, no options) writes the same task, counters and events as enqueue_many, ..."""
    # ... registers a new queue, and refuses an oversized payload writing nothing (tracing off: with it on, enqueue
    # takes enqueue_many's path).
    q = Queue("plain", Connection(conn.url, conn.config.with_(opentelemetry=False)))
    with pytest.raises(PayloadTooLarge):
        q.enqueue("x" * (conn.config.max_payload_bytes + 1))
    assert client.dbsize() == 0
    a = q.enqueue("one")
    assert client.smembers(keys.KNOWN_QUEUES) == {b"plain"}
    (b,) = q.enqueue_many(["one"])
    fields = [{k: v for k, v in client.hgetall(keys.task_key("plain", i)).items() if k != b"c"} for i in (a, b)]
    assert fields[0] == fields[1] == {b"p": b"one"}  # pending: no "s" (task.py)
    assert [i.decode() for i in client.lrange(keys.queue_key("plain", "pending"), 0, -1)] == [a, b]
    assert q.counts()["pending"] == 2 and q.get(a).payload == "one"


@pytest.mark.parametrize("payload", [None, 42, {"a": 1}, ["x"]])
def test_non_text_payloads_are_refused(client, payload):
    """Payloads that are not str or bytes raise InvalidTask and write nothing."""
    with pytest.raises(InvalidTask, match="str or bytes"):
        Queue("t1").enqueue(payload)
    assert client.dbsize() == 0


def test_unknown_and_foreign_task_ids(client):
    """An unknown id reads as None and cancels as False; an id of another queue is an error."""
    q = Queue("t1")
    assert q.get("t1-0123456789abcdef") is None
    assert q.cancel("t1-0123456789abcdef") is False
    with pytest.raises(TaskNotFound):
        q.retry("t1-0123456789abcdef")
    with pytest.raises(InvalidInput):
        q.get("t2-0123456789abcdef")
    with pytest.raises(InvalidInput):
        q.cancel("nonsense")
    assert client.dbsize() == 0


def test_stale_lease_is_refused(client, conn):
    """A delivery recovered from a worker presumed dead can't be completed by that worker."""
    q = Queue("t1")
    tid = q.enqueue("p")
    (old,) = take(client, "t1", "w-old")
    commands.unregister("t1", "w-old", "worker_failed").run(client)  # presumed dead: requeued
    assert q.get(tid).state == "pending"
    (new,) = take(client, "t1", "w-new")
    assert new.id == tid and new.lease > old.lease
    assert finish(client, old, "w-old") == Code.STALE
    assert q.get(tid).state == "active" and q.get(tid).worker == "w-new"
    assert finish(client, new, "w-new") == Code.COMPLETED
    assert q.get(tid) is None and q.counts()["completed"] == 1


def test_engine_imports_without_django():
    """queues.engine is plain Python + Lua: importing it never imports Django."""
    code = (
        "import sys; import queues.engine, queues.engine.worker, queues.engine.readmodel; "
        "assert not any(m == 'django' or m.startswith('django.') for m in sys.modules), 'django imported'"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent)
    )
