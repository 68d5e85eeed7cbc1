"""Redis Cluster and Sentinel URLs, MIN_REPLICAS_ACK, and worqr spread over a real cluster.

The URL and setting checks run in every session; the tests taking ``redis_cluster`` run in the
session ``make test`` starts on a 3-master cluster (``WORQR_TEST_REDIS=cluster``)."""

import asyncio
import logging
import re
import shutil

import pytest
import redis
import redis.asyncio

from queues.engine import commands, connection, keys, readmodel
from queues.engine.config import Config
from queues.engine.connection import Connection, parse
from queues.engine.errors import ConfigurationError, NotReplicated
from queues.engine.queue import Queue
from queues.testing import RedisServer
from tests.conftest import wait_for

# -- URLs ------------------------------------------------------------------------------------


def test_cluster_urls_list_their_seed_nodes_and_options():
    """A redis+cluster URL gives every listed node, the credentials and typed query options."""
    t = parse("redis+cluster://u:p%40ss@10.0.0.1:7000,10.0.0.2:7001/?socket_timeout=2.5")
    assert t.kind == "cluster" and t.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001))
    assert t.options["username"] == "u" and t.options["password"] == "p@ss"
    assert t.options["socket_timeout"] == 2.5 and "ssl" not in t.options
    assert parse("rediss+cluster://h:1").options["ssl"] is True
    assert parse("redis+cluster://h:1/0").nodes == (("h", 1),)


def test_sentinel_urls_give_service_db_and_sentinel_credentials():
    """A redis+sentinel URL names the Sentinels, the service and the database."""
    # sentinel_* query options go to the Sentinels, the rest to the master.
    t = parse("redis+sentinel://:secret@s1:26379,s2:26380/mymaster/3?sentinel_password=sp")
    assert t.kind == "sentinel" and t.nodes == (("s1", 26379), ("s2", 26380))
    assert (t.service, t.db) == ("mymaster", 3)
    assert t.options["password"] == "secret" and t.sentinel_options == {"password": "sp"}
    assert parse("redis+sentinel://s1:26379/mymaster").db == 0
    assert parse("redis://localhost:6379/2").kind == "redis"


@pytest.mark.parametrize(
    "url, words",
    [
        ("redis+cluster://nohost", "not host:port"),
        ("redis+cluster://h:99999", "not host:port"),
        ("redis+cluster://h:1/2", "only database 0"),
        ("redis+sentinel://s:26379", "/<service>[/<db>]"),
        ("redis+sentinel://s:26379/m/x", "/<service>[/<db>]"),
        ("redis+sentinel://s:26379/m/0/extra", "/<service>[/<db>]"),
        ("redis+cluster://u:topsecret@h:1/?socket_timeout=abc", "socket_timeout"),
        ("localhost:6379", "not a Redis URL"),
    ],
)
def test_bad_urls_are_refused_clearly_before_any_command(url, words):
    """A malformed cluster or Sentinel URL is a ConfigurationError naming the fault (and never showing the password)."""
    with pytest.raises(ConfigurationError) as info:
        Connection(url)
    assert words in str(info.value) and "topsecret" not in str(info.value)


def test_min_replicas_ack_settings_are_checked():
    """MIN_REPLICAS_ACK is a count >= 0 and REPLICAS_ACK_TIMEOUT a positive duration."""
    assert Config.from_mapping({"MIN_REPLICAS_ACK": 1, "REPLICAS_ACK_TIMEOUT": 0.5}).min_replicas_ack == 1
    for bad in ({"MIN_REPLICAS_ACK": -1}, {"REPLICAS_ACK_TIMEOUT": 0}, {"MIN_REPLICAS_ACK": "1"}):
        with pytest.raises(ConfigurationError):
            Config.from_mapping(bad)


def test_an_enqueue_no_replica_confirmed_raises_not_replicated(conn):
    """With MIN_REPLICAS_ACK above the replicas there are, enqueue WAITs, then raises NotReplicated (the task is ..."""
    # ... on the master; the producer is told it may not survive).
    replicas = 1 if connection.is_cluster(conn.client) else 0  # the test cluster: one per master
    strict = Connection(conn.url, conn.config.with_(min_replicas_ack=replicas + 1, replicas_ack_timeout=0.5))
    with pytest.raises(NotReplicated) as info:
        Queue("t1", strict).enqueue("x")
    assert (info.value.wanted, info.value.got) == (replicas + 1, replicas)
    assert "a failover now could lose it" in str(info.value)
    assert Queue("t1").counts()["pending"] == 1


def test_an_enqueue_many_into_a_new_queue_no_replica_confirmed_raises_not_replicated(conn):
    """The same for enqueue_many into a queue that does not exist yet: the tasks are in, and NotReplicated says so."""
    # (its first call only learns the queue does not exist; that reply's WAIT must not end the enqueue)
    replicas = 1 if connection.is_cluster(conn.client) else 0
    strict = Connection(conn.url, conn.config.with_(min_replicas_ack=replicas + 1, replicas_ack_timeout=0.5))
    with pytest.raises(NotReplicated):
        Queue("t1-many", strict).enqueue_many(["x", "y"])
    assert Queue("t1-many").counts()["pending"] == 2


# -- the scripts that end a task WAIT too --------------------------------------------------------

#: The calls that end a task (or hand it back): each writes with ``durable="log"``.
ENDING = ("finish", "fail", "start", "stop")


@pytest.fixture
def replicas(conn, request):
    """How many replicas the master of every queue has: on a single Redis, one started here."""
    if connection.is_cluster(conn.client):
        yield 1  # the test cluster: one per master
        return
    master = request.getfixturevalue("redis_server")
    replica = RedisServer().start()
    r = redis.Redis(port=replica.port)
    delay = conn.client.config_get("repl-diskless-sync-delay")["repl-diskless-sync-delay"]
    conn.client.config_set("repl-diskless-sync-delay", 0)  # not 5 s before the first sync
    try:
        r.replicaof("127.0.0.1", master.port)
        online = lambda: conn.client.info("replication").get("slave0", {}).get("state") == "online"  # noqa: E731
        wait_for(online, 20, message="the replica to sync")
        yield 1
    finally:
        r.close()
        replica.stop()
        conn.client.config_set("repl-diskless-sync-delay", delay)
        shutil.rmtree(replica.dir, ignore_errors=True)
        wait_for(lambda: conn.client.info("replication")["connected_slaves"] == 0, 20, message="the replica gone")


def _ending_call(name, queue, task):
    ack = [(task.id, task.lease, "", False)]
    if name == "finish":
        return commands.finish(queue, "w1", ack, result_ttl=60)
    if name == "fail":
        return commands.fail(
            queue,
            "w1",
            task.id,
            task.lease,
            "E: boom",
            "tb",
            retries=0,
            backoff=1,
            backoff_max=10,
            jitter=0,
            history=10,
        )
    if name == "stop":
        return commands.stop(queue, "w1", [(task.id, task.lease, False)])
    return commands.start(queue, "w1", 1, lock_ttl=35, grace=1, default_timeout=0, result_ttl=60, acks=ack)


def _run(call, durable, road):
    """``call`` on ``durable``'s synchronous client, or on a new asyncio one (a worker's road)."""
    if road == "sync":
        return call.run(durable.client)

    async def run():
        client = durable.async_client()
        try:
            return await call.arun(client)
        finally:
            for node_client in client.__dict__.get("worqr_node_clients", {}).values():
                await node_client.aclose()
            await client.aclose()

    return asyncio.run(run())


def _waits(conn, queue):
    """How many WAITs the master of ``queue``'s slot has run (INFO commandstats)."""
    client = conn.client
    if connection.is_cluster(client):
        client = client.get_redis_connection(client.get_node_from_key(keys.queue_key(queue, "pending")))
    return client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0)


def _end_each(conn, durable, road):
    """Take a task for each of ENDING and end it so on ``durable``: [(name, whether it WAITed)]."""
    commands.register("e1", "w1", ttl=30, lock_ttl=35, grace=1, default_timeout=0, fresh=True).run(conn.client)
    Queue("e1").enqueue_many(list(ENDING))
    take = commands.start("e1", "w1", len(ENDING), lock_ttl=35, grace=1, default_timeout=0, result_ttl=60)
    tasks = take.run(conn.client).tasks  # no acks: no WAIT
    assert [t.payload for t in tasks] == list(ENDING)
    out = []
    for name, task in zip(ENDING, tasks):
        before = _waits(conn, "e1")
        _run(_ending_call(name, "e1", task), durable, road)
        # (Redis 7 counts a WAIT that blocked twice: when called and when unblocked.)
        out.append((name, _waits(conn, "e1") > before))
    counts = Queue("e1").counts()
    # stop hands its task back (to w1 at once, idle since its start took none, or pending)
    assert (counts["completed"], counts["failed"], counts["pending"] + counts["active"]) == (2, 1, 1), counts
    return out


@pytest.mark.parametrize("road", ["sync", "async"])
def test_the_calls_that_end_a_task_wait_and_log_when_replicas_fall_short(conn, replicas, caplog, road):
    """finish, fail, stop and start-with-acks WAIT for MIN_REPLICAS_ACK; short of it: a warning each."""
    # The worker's calls: a shortfall is logged (the outcome stands on the master), never raised.
    durable = Connection(conn.url, conn.config.with_(min_replicas_ack=replicas + 1, replicas_ack_timeout=0.2))
    with caplog.at_level(logging.WARNING, logger="worqr"):
        ended = _end_each(conn, durable, road)
    assert ended == [(name, True) for name in ENDING]
    warned = [r.getMessage() for r in caplog.records if r.name == "worqr"]
    # (how many of the replicas there are had it within 200 ms depends on the machine's load: at most all)
    short = re.compile(rf"worqr: (\w+) for queue e1: (\d+) of {replicas + 1} replica\(s\) had the write within 200 ms")
    got = [(m[1], int(m[2])) if (m := short.fullmatch(w)) else w for w in warned]
    assert [g[0] if isinstance(g, tuple) else g for g in got] == list(ENDING), warned
    assert all(n <= replicas for _, n in got), warned


@pytest.mark.parametrize("road", ["sync", "async"])
def test_the_calls_that_end_a_task_wait_quietly_with_enough_replicas(conn, replicas, caplog, road):
    """finish, fail, stop and start-with-acks each WAIT once; with the replicas there, nothing is logged."""
    durable = Connection(conn.url, conn.config.with_(min_replicas_ack=replicas, replicas_ack_timeout=2.0))
    with caplog.at_level(logging.WARNING, logger="worqr"):
        ended = _end_each(conn, durable, road)
    assert ended == [(name, True) for name in ENDING]
    assert [r.getMessage() for r in caplog.records if r.name == "worqr"] == []


# -- on the cluster --------------------------------------------------------------------------


def test_queues_land_on_different_masters(redis_cluster, client):
    """Eight queues spread over the three masters."""
    # each queue's keys are on one master, which holds them (read on the node itself), and the overview reads them all.
    names = [f"q{i}" for i in range(8)]
    for name in names:
        Queue(name).enqueue(name)
    ports = {}
    for name in names:
        node = client.get_node_from_key(keys.queue_key(name, "pending"))
        ports[name] = node.port
        assert redis_cluster.node_at(node.port).client().llen(keys.queue_key(name, "pending")) == 1
    assert len(set(ports.values())) == 3, ports
    overview = {q["name"]: q["pending"] for q in readmodel.overview(client)}
    assert overview == dict.fromkeys(names, 1)


def test_a_cluster_asyncio_client_packs_with_hiredis_on_every_master(redis_cluster, conn, client):
    """The asyncio cluster client's connections, to seed and found nodes, pack with hiredis; values round-trip on every master."""
    values = ["é" * 40, b"\x00\xff" * 3000, 10**18, 2.5, ""]
    names = [f"packed-{i}" for i in range(12)]  # spread over the three masters

    async def go(r):
        for name in names:
            for value in values:
                await r.rpush(name, value)
        kinds = {type(c).__name__ for node in r.get_nodes() for c in node._connections}
        await r.aclose()
        return kinds

    kinds = asyncio.run(go(conn.async_client()))
    assert kinds and all(k.startswith("Hiredis") for k in kinds), kinds
    assert len({client.get_node_from_key(n).port for n in names}) == 3
    encoder = redis.asyncio.Connection().encoder
    for name in names:
        assert client.lrange(name, 0, -1) == [encoder.encode(v) for v in values]


def test_replicated_writes_on_the_cluster_wait_for_the_slot_master_replica(redis_cluster, conn):
    """With MIN_REPLICAS_ACK=1 on the cluster, enqueue and finish WAIT on the master of the queue's slot (each ..."""
    # ... master has a replica): nothing raises, and the replica has the task.
    durable = Connection(conn.url, conn.config.with_(min_replicas_ack=1, replicas_ack_timeout=2.0))
    for name in ("a1", "b2", "c3"):
        tid = Queue(name, durable).enqueue("x")
        master = redis_cluster.node_at(conn.client.get_node_from_key(keys.task_key(name, tid)).port)
        replica = next(
            n
            for n in redis_cluster.nodes
            if n.alive and n.client().info("replication").get("master_port") == master.port
        )
        on_replica = replica.client()
        assert on_replica.execute_command("READONLY") and on_replica.exists(keys.task_key(name, tid))
        commands.register(name, "w1", ttl=3, lock_ttl=35, grace=10, default_timeout=0, fresh=True).run(durable.client)
        started = commands.start(name, "w1", 1, lock_ttl=35, grace=10, default_timeout=0, result_ttl=60).run(
            durable.client
        )
        (task,) = started.tasks
        codes = commands.finish(name, "w1", [(task.id, task.lease, "", False)], result_ttl=60).run(durable.client)
        assert codes == [commands.Code.COMPLETED]


def test_a_worker_serves_queues_on_every_master(redis_cluster, client, workers):
    """One worker process serving queues on the three masters runs all their tasks, woken by the control channel ..."""
    # ... wherever its queues' scripts publish.
    names = ["t1", "t2", "t3", "t4", "t5", "t6"]
    assert len({client.get_node_from_key(keys.queue_key(n, "pending")).port for n in names}) >= 2
    workers(names, concurrency=2, name="spread")
    wait_for(lambda: any(w["name"] == "spread" for w in readmodel.workers(client)), 15, message="register")
    for n in names:
        Queue(n).enqueue_many(["a", "b"])
    wait_for(
        lambda: (
            all(q["completed"] == 2 for q in readmodel.overview(client) if q["name"] in names)
            and len(readmodel.overview(client)) == len(names)
        ),
        20,
        message="every task to complete",
    )
