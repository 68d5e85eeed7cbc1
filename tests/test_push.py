"""The common enqueue's short road: the ``push`` script (``Queue.enqueue`` of a text payload with no
options) and ``direct`` (its own connections, without redis-py's pool checks). Each test tries
to make the short road differ from the long one: a different task, a lost or doubled task, or a
reply read by the wrong call."""

import json
import os
import signal
import threading
import time

import pytest

from queues import Queue
from queues.engine import Connection, commands, direct, keys, scripts
from queues.engine.commands import _producing as producing
from queues.engine.config import Config
from tests.conftest import ON_CLUSTER, records, wait_for

pytestmark = pytest.mark.skipif(
    ON_CLUSTER, reason="direct serves a plain Redis (a cluster client keeps redis-py's road)"
)


@pytest.fixture(autouse=True)
def _push_again():
    """Each test starts with push tried first (a decline sends a queue's calls straight to
    enqueue for a second)."""
    producing._declined.clear()


def _hash(client, queue, task_id):
    return {k.decode(): v for k, v in client.hgetall(keys.task_key(queue, task_id)).items()}


def _events(client, queue, action):
    """The messages on the queue's event channel while ``action`` runs."""
    sub = client.pubsub()
    sub.subscribe(keys.queue_key(queue, keys.EVENTS))
    sub.get_message(timeout=1)
    action()
    out = []
    while (m := sub.get_message(timeout=0.2)) is not None:
        out.append(json.loads(m["data"]))
    sub.close()
    return out


@pytest.mark.parametrize("payload", ["short", "y" * 100, "z" * 2000, "é\udcff", "é" * 500_000])
def test_plain_enqueue_writes_exactly_what_enqueue_many_writes(client, payload):
    """The same payload through ``enqueue`` (push) and ``enqueue_many`` (enqueue)."""
    # the same task fields (pieces, bytes kind, no state field), the same event, the same stats and list.
    q = Queue("t1")
    ev_one = _events(client, "t1", lambda: q.enqueue(payload))
    ev_many = _events(client, "t1", lambda: q.enqueue_many([payload]))
    one, many = client.lrange(keys.queue_key("t1", "pending"), 0, -1)
    h_one, h_many = _hash(client, "t1", one.decode()), _hash(client, "t1", many.decode())
    assert h_one.pop("c") and h_many.pop("c")
    assert h_one == h_many and "s" not in h_one
    assert q.get(one.decode()).payload == payload and q.get(one.decode()).state == "pending"
    for event, task_id in ((ev_one, one), (ev_many, many)):
        assert event == [{"e": "enqueued", "n": 1, "ids": [task_id.decode()], "delayed": False, "q": "t1"}]
    assert q.counts()["pending"] == 2 and int(client.hget(keys.queue_key("t1", "stats"), "enqueued")) == 2
    assert client.sismember(keys.KNOWN_QUEUES, "t1")


def test_push_declines_without_writing_when_a_worker_is_idle_or_the_queue_has_limits(client):
    """An idle worker (enqueue hands it the task in its wake-up) or limits (enqueue counts them)."""
    # push answers nothing and writes nothing, so the caller's enqueue is the only write.
    q = Queue("t1")
    for key, member in ((keys.queue_key("t1", "idle"), "w-1"), (keys.queue_key("t1", "limits"), "c")):
        client.flushall()
        if key.endswith("idle"):
            client.sadd(key, member)
        else:
            client.hset(key, member, "1")
        task_id = f"t1-{os.urandom(8).hex()}"
        assert commands.push("t1", task_id, b"p").run(client) is None
        assert not client.exists(keys.task_key("t1", task_id), keys.queue_key("t1", "pending"))
        assert not client.exists(keys.queue_key("t1", "stats"), keys.queue_key("t1", "meta"))
        task_id = q.enqueue("through enqueue")
        assert q.get(task_id).payload == "through enqueue"
        assert int(client.hget(keys.queue_key("t1", "stats"), "enqueued")) == 1


def test_after_a_decline_the_queue_goes_straight_to_enqueue_for_a_second(client, monkeypatch):
    """A declined push (a worker idle) sends the queue's next calls straight to enqueue, which hands them over."""
    # once that second is over push is tried again (and takes the call once no worker is idle).
    q = Queue("t1")
    client.sadd(keys.queue_key("t1", "idle"), "w-gone")  # a worker listed idle (not running)
    q.enqueue("declined")
    assert "t1" in producing._declined
    calls = []
    real = scripts.run
    monkeypatch.setattr(scripts, "run", lambda c, name, *a, **k: calls.append(name) or real(c, name, *a, **k))
    q.enqueue("straight")
    assert calls == ["enqueue"]
    client.delete(keys.queue_key("t1", "idle"))
    monkeypatch.setattr(producing, "_DECLINED_FOR", 0.0)
    q.enqueue("push again")
    assert calls == ["enqueue", "push"]
    pending = [i.decode() for i in client.lrange(keys.queue_key("t1", "pending"), 0, -1)]
    assert [q.get(i).payload for i in pending] == ["declined", "straight", "push again"]


def test_a_task_enqueued_while_the_worker_is_idle_runs_at_once(client, workers):
    """With a real worker idle on the queue, the plain enqueue still reaches it in its wake-up."""
    workers(["t1"])
    wait_for(lambda: client.scard(keys.queue_key("t1", "idle")) == 1, 20, message="the worker to be idle")
    ids = []
    for i in range(20):
        ids.append(Queue("t1").enqueue(f"idle-{i}"))
        wait_for(lambda n=i + 1: len(records(client, "t1")) == n, 5, interval=0.005, message=f"run {i}")
    assert [r["id"] for r in records(client, "t1")] == ids


def test_a_payload_over_the_limit_is_refused_before_anything_is_sent(client):
    """5 MB of text (the limit is MAX_PAYLOAD_BYTES, 1 MiB): PayloadTooLarge, and nothing in Redis."""
    from queues.engine.errors import PayloadTooLarge

    with pytest.raises(PayloadTooLarge, match="MAX_PAYLOAD_BYTES"):
        Queue("t1").enqueue("x" * 5_000_000)
    assert not client.exists(keys.queue_key("t1", "pending"), keys.queue_key("t1", "stats"))


def test_an_existing_id_is_left_as_it_is(client):
    """push with the id of a task that exists changes nothing of it (enqueue is idempotent by id)."""
    q = Queue("t1")
    task_id = q.enqueue("first")
    before = _hash(client, "t1", task_id)
    reply = commands.push("t1", task_id, b"second").run(client)
    assert reply.ids == [task_id] and _hash(client, "t1", task_id) == before
    assert q.counts()["pending"] == 1


class _Stop(Exception):
    pass


def test_an_interrupted_call_leaves_no_reply_for_the_next_one(client):
    """A call interrupted while it waits for its reply (Redis paused, a signal handler raising)."""
    # its connection is dropped, so the next call reads its own reply, not the late one.
    q = Queue("t1")
    q.enqueue("warm")  # the short road has a connection now
    client.execute_command("CLIENT", "PAUSE", "400", "WRITE")

    def interrupt(*_):
        raise _Stop()

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(_Stop):
            q.enqueue("interrupted")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    time.sleep(0.5)  # the pause is over: the interrupted call's reply (if any) has come back
    for i in range(5):
        task_id = q.enqueue(f"next-{i}")
        assert q.get(task_id).payload == f"next-{i}"


def _kill_paced(killer_client, n):
    """Kill every other normal client connection, then pause 2-10 ms, stretched by how long the
    kill's own round trip took (measured alongside: on a loaded machine a call takes longer, and
    kills every few ms would leave none of them time to finish). Returns how many were killed."""
    began = time.monotonic()
    killed = killer_client.client_kill_filter(_type="normal", skipme=True)
    time.sleep(0.002 + 0.008 * (n % 3) / 2 + 4 * (time.monotonic() - began))
    return killed


def test_connections_killed_mid_flight_lose_and_double_nothing(client):
    """Four threads enqueue 300 tasks or more each while every other client connection is killed every few ms."""
    # every call returns the id of its own task, and each task is in the queue once.
    # Retries for as long as it takes (not ENQUEUE_RETRY_FOR's 2 s, which a loaded machine can
    # spend on a few attempts): what is judged is that no call loses or doubles a task.
    url = Queue("t1").connection.url
    q = Queue("t1", Connection(url, Config(redis_url=url, enqueue_retry_for=120)))
    stop = threading.Event()
    enough = threading.Event()  # more than 20 connections were killed: the test has bitten
    killed = []

    def killer():
        killer_client = Connection(q.connection.url).client
        while not stop.is_set():
            killed.append(_kill_paced(killer_client, len(killed)))
            if sum(killed) > 20:
                enough.set()

    results, errors = {}, []

    def producer(n):
        try:
            # 300 each, and on until enough connections were killed (a fast machine may
            # enqueue 300 between a few kills; up to 3,000 each)
            i = 0
            while i < 300 or (not enough.is_set() and i < 3000):
                payload = f"p{n}-{i}"
                results[payload] = q.enqueue(payload)
                i += 1
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    k = threading.Thread(target=killer)
    k.start()
    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    k.join()
    assert not errors and sum(killed) > 20
    pending = [i.decode() for i in client.lrange(keys.queue_key("t1", "pending"), 0, -1)]
    assert len(pending) == len(set(pending)) == len(results) >= 1200 and set(pending) == set(results.values())
    for payload, task_id in results.items():
        assert q.get(task_id).payload == payload


def test_redis_restarted_and_scripts_flushed(client, redis_server):
    """Across a Redis restart (its scripts gone) the short road's held connections are found closed before use ..."""
    # ... and connected again (no error for the first call after it, as with redis-py's pool), and the scripts are
    # loaded again.
    q = Queue("t1")
    first = q.enqueue("before")
    assert q.counts()["pending"] == 1
    redis_server.stop()
    redis_server.start()
    assert q.counts()["pending"] == 0  # the first call after the restart, on a held connection
    client.flushall()
    second = q.enqueue("after the restart")
    client.script_flush()
    third = q.enqueue("after SCRIPT FLUSH")
    assert first != second
    assert [q.get(i).payload for i in (second, third)] == ["after the restart", "after SCRIPT FLUSH"]


def test_a_forked_child_uses_connections_of_its_own(client):
    """A child forked after the parent enqueued (a prefork server) enqueues on new connections."""
    # the parent's go on serving it.
    q = Queue("t1")
    q.enqueue("parent before")
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 when its enqueues are right
        try:
            ok = all(q.get(q.enqueue(f"child {i}")).payload == f"child {i}" for i in range(50))
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    for i in range(50):
        assert q.get(q.enqueue(f"parent {i}")).payload == f"parent {i}"
    assert os.waitpid(pid, 0)[1] == 0
    assert q.counts()["pending"] == 101


def test_close_drops_the_short_roads_connections(client):
    """The connections the short road holds stay its client's pool's."""
    # closing the client (as ``Connection.close`` does) closes them, and a call after that connects again.
    conn = Connection(Queue("t1").connection.url)
    q = Queue("t1", conn)
    threads = [threading.Thread(target=lambda: [q.enqueue("x") for _ in range(50)]) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    road = direct.for_client(conn.enqueue_client)
    held = list(road._held)
    assert held and all(c._sock is not None for c in held)
    conn.enqueue_client.close()
    assert all(c._sock is None for c in held)
    assert q.get(q.enqueue("after close")).payload == "after close"


def test_clients_it_does_not_serve_keep_redis_py(client):
    """A client that waits for replicas, or one on another pool class, is not served."""
    import redis

    waits = redis.Redis.from_url(Queue("t1").connection.url)
    waits.worqr_replicas = (1, 100)
    blocking = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(Queue("t1").connection.url))
    assert direct.for_client(waits) is None and direct.for_client(blocking) is None
    assert direct.for_client(redis.Redis.from_url(Queue("t1").connection.url)) is not None


# -- the asyncio road (a worker's calls) -----------------------------------------------------


def test_async_calls_on_connections_killed_mid_flight_get_their_own_replies(client):
    """Six coroutines of one event loop enqueue 150 tasks each through the asyncio road of a client whose pool ..."""
    # ... has six connections, starting with the scripts unknown to Redis, while every other client connection is killed
    # every few ms: nothing waits for ever for a connection (the road held them all, then loaded the script through the
    # pool: a deadlock), each call that returns gives the id it was asked for (no reply read by the wrong call), and
    # each task is in the queue once.
    import asyncio

    from queues.engine.connection import NETWORK_ERRORS

    conn = Connection(Queue("t1").connection.url)
    client.script_flush()
    stop = threading.Event()
    killed = []

    def killer():
        killer_client = Connection(conn.url).client
        while not stop.is_set():
            killed.append(_kill_paced(killer_client, len(killed)))

    ids = {(n, i): f"t1-{os.urandom(8).hex()}" for n in range(6) for i in range(150)}

    async def producer(aclient, n, mismatches):
        for i in range(150):
            while True:
                try:
                    call = commands.enqueue("t1", [(ids[n, i], f"p{n}-{i}".encode(), "", "")])
                    reply = await call.arun(aclient)
                    break
                except NETWORK_ERRORS:  # given up after the client's retries: the same id again
                    await asyncio.sleep(0.001)
            if reply.ids != [ids[n, i]]:
                mismatches.append((ids[n, i], reply.ids))

    async def main():
        aclient = conn.async_client(max_connections=6)
        mismatches = []
        try:
            # a ceiling only (a deadlock waits for ever): a loaded machine takes minutes
            await asyncio.wait_for(asyncio.gather(*(producer(aclient, n, mismatches) for n in range(6))), 300)
        finally:
            await aclient.aclose()
        return mismatches

    k = threading.Thread(target=killer)
    k.start()
    try:
        mismatches = asyncio.run(main())
    finally:
        stop.set()
        k.join()
    assert mismatches == [] and sum(killed) > 20
    pending = [i.decode() for i in client.lrange(keys.queue_key("t1", "pending"), 0, -1)]
    assert len(pending) == len(set(pending)) == 900 and set(pending) == set(ids.values())
    q = Queue("t1")
    assert all(q.get(task_id).payload == f"p{n}-{i}" for (n, i), task_id in ids.items())


def test_an_async_send_redis_does_not_read_times_out_and_drops_its_connection(client, redis_server):
    """Redis frozen (SIGSTOP) while a 32 MiB call is sent through the asyncio road."""
    # the send waits for the socket no longer than the client's socket timeout, then fails with a timeout and drops its
    # connection, so the next call, once Redis runs again, reads its own reply (and the timed-out one ran whole or not
    # at all).
    import asyncio

    import redis.asyncio
    from redis.backoff import NoBackoff
    from redis.exceptions import TimeoutError as RedisTimeout
    from redis.retry import Retry

    big, after = f"t1-{os.urandom(8).hex()}", f"t1-{os.urandom(8).hex()}"

    async def main():
        aclient = redis.asyncio.Redis.from_url(redis_server.url, socket_timeout=0.5, retry=Retry(NoBackoff(), 0))
        try:
            await commands.enqueue("t1", [("warm", b"w", "", "")]).arun(aclient)  # a held connection
            assert direct.for_async(aclient)._held
            redis_server.proc.send_signal(signal.SIGSTOP)
            try:
                began = time.monotonic()
                with pytest.raises(RedisTimeout):
                    await commands.enqueue("t1", [(big, b"x" * (32 << 20), "", "")]).arun(aclient)
                took = time.monotonic() - began
            finally:
                redis_server.proc.send_signal(signal.SIGCONT)
            # Redis may first run the 32 MiB call whose bytes reached it (over 0.5 s under a CPU
            # hog): connections made from now on wait longer. A connection kept from before (what
            # this test guards against) keeps its 0.5 s and would read the stale reply.
            aclient.connection_pool.connection_kwargs["socket_timeout"] = 30
            reply = await commands.enqueue("t1", [(after, b"a", "", "")]).arun(aclient)
            return took, reply.ids
        finally:
            await aclient.aclose()

    took, ids = asyncio.run(main())
    assert 0.4 < took < 3 and ids == [after]
    q = Queue("t1")
    assert q.get(after).payload == "a"
    # What was written before the timeout is still sent as the socket closes (as with redis-py's
    # own send): the timed-out call may have run, whole, or not at all; never in part.
    late = q.get(big)
    assert late is None or late.payload == "x" * (32 << 20)
