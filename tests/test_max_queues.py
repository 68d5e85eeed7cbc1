"""``WORQR["MAX_QUEUES"]`` (issue 32): an enqueue that would make a queue beyond it is refused with
a clear error on every enqueue path (the engine's, the HTTP API's, batches, the enqueue command)
and adds nothing; an enqueue into a queue that exists costs no more than before; workers and
the outbox still make the queues they serve or hold."""

import io
import os
import time

import pytest
from django.core.management import CommandError, call_command

from queues import Queue, TooManyQueues, outbox
from queues.conf import build_config
from queues.engine import Batch, connection, keys
from queues.models import OutboxTask
from tests.conftest import wait_for, wait_registered
from tests.support.api import Api, make_token

URL = os.environ["WORQR_REDIS_URL"]


@pytest.fixture
def at_most(_engine):
    """``at_most(n)``: the engine's connection (returned) with ``MAX_QUEUES`` = n, and queues
    q0..q{n-1} made. (The test's ``client`` was closed with the connection it came from.)"""

    def limit(n):
        conn = connection.configure(build_config().with_(max_queues=n), URL)
        for i in range(n):
            Queue(f"q{i}").enqueue("x")
        return conn

    yield limit
    connection.configure(build_config(), URL)


def keys_of(client, queue):
    return sorted(k.decode() for k in client.scan_iter(f"worqr:{{{queue}}}:*"))


def commands_run(client):
    stats = client.info("commandstats")
    return {name[len("cmdstat_") :]: v["calls"] for name, v in stats.items()}


def test_every_engine_enqueue_into_a_new_queue_beyond_the_limit_is_refused(at_most):
    """At MAX_QUEUES, each way the engine enqueues into a new queue raises TooManyQueues and adds nothing."""
    client = at_most(3).client
    attempts = {
        "enqueue": lambda q: q.enqueue("x"),
        "enqueue with options": lambda q: q.enqueue("x", delay=5, tags=["t"]),
        "enqueue_many": lambda q: q.enqueue_many(["x", "y"]),
        "enqueue_many with ids": lambda q: q.enqueue_many(["x"], ids=[f"{q.name}-{0:016x}"]),
        "bytes": lambda q: q.enqueue(b"\x00"),
        "a batch": lambda q: Batch().enqueue_many(q.name, ["x"]),
    }
    for how, attempt in attempts.items():
        with pytest.raises(TooManyQueues) as refused:
            attempt(Queue("new"))
        assert "queue 'new' does not exist and can't be made: there are 3 queues already" in str(refused.value), how
        assert "WORQR['MAX_QUEUES']" in str(refused.value)
        assert keys_of(client, "new") == [] and client.scard(keys.KNOWN_QUEUES) == 3, how
    assert Queue("q1").enqueue_many(["more", "and more"])  # the queues there take tasks as before
    assert Queue("q1").counts()["pending"] == 3


def test_an_enqueue_into_an_existing_queue_costs_one_round_trip_as_before(at_most, redis_server):
    """Into a queue that exists, an enqueue is one script call: no look at the known queues."""
    client = at_most(2).client
    before = commands_run(client)
    for _ in range(10):
        Queue("q0").enqueue("x")
    after = commands_run(client)
    assert after["evalsha"] - before["evalsha"] == 10
    assert all(after.get(c, 0) == before.get(c, 0) for c in ("sismember", "scard", "sadd"))


def test_the_http_api_refuses_a_new_queue_beyond_the_limit_with_409(at_most, db):
    """POST /api/tasks, /api/create and a batch's tasks into a new queue answer 409 naming MAX_QUEUES."""
    client = at_most(2).client
    api = Api(make_token("enqueue_task"))
    batch = api.post("/api/batches", {}).json()["id"]
    for path, body in (
        ("/api/tasks", {"queue": "new", "payload": "x"}),
        ("/api/create", {"topic": "new", "content": "x"}),
        (f"/api/batches/{batch}/tasks", {"queue": "new", "payloads": ["x"]}),
    ):
        answer = api.post(path, body)
        assert answer.status_code == 409, (path, answer.content)
        assert answer.json()["field"] == "queue" and "WORQR['MAX_QUEUES']" in answer.json()["error"]
    assert keys_of(client, "new") == [] and client.scard(keys.KNOWN_QUEUES) == 2
    assert api.post("/api/tasks", {"queue": "q0", "payload": "x"}).status_code == 201


def test_the_enqueue_command_says_why(at_most):
    """manage.py enqueue into a new queue beyond the limit fails with the message."""
    at_most(1)
    with pytest.raises(CommandError, match="MAX_QUEUES"):
        call_command("enqueue", "new", "x", stdout=io.StringIO())


def test_a_forgotten_or_dropped_queue_makes_room(at_most):
    """Dropping a queue at the limit lets a new one be made."""
    client = at_most(2).client
    Queue("q1").drop()
    Queue("new").enqueue("x")
    assert sorted(m.decode() for m in client.smembers(keys.KNOWN_QUEUES)) == ["new", "q0"]


def test_a_worker_still_makes_the_queue_it_serves(at_most, workers):
    """At the limit a worker still serves a new queue, which then takes enqueues."""
    client = at_most(2).client
    worker = workers(["t1"], name="beyond")
    wait_registered(client, "beyond")
    wait_for(lambda: client.sismember(keys.KNOWN_QUEUES, "t1"), message="the worker to list its queue")
    assert Queue("t1").enqueue('{"ok": 1}')
    worker.kill()


def test_the_outbox_is_checked_at_the_call_and_never_drops_what_it_holds(at_most, transactional_db, monkeypatch):
    """A durable enqueue into a new queue at the limit is refused; one accepted before is pushed anyway."""
    client = at_most(2).client
    with pytest.raises(TooManyQueues):
        Queue("new").enqueue("x", durable=True)
    assert not OutboxTask.objects.exists()
    Queue("q1").drop()
    monkeypatch.setattr(outbox, "_down_until", time.monotonic() + 60)  # Redis seen away: kept in the outbox
    (task_id,) = Queue("kept").enqueue_many(["kept"], durable=True)
    Queue("q1").enqueue("x")  # meanwhile the limit is reached
    monkeypatch.setattr(outbox, "_down_until", 0.0)
    assert outbox.relay_once("default", min_age=0) == 1
    assert Queue("kept").get(task_id) is not None and client.scard(keys.KNOWN_QUEUES) == 3
