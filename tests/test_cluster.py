"""Redis Cluster and Sentinel URLs, MIN_REPLICAS_ACK, and worqr spread over a real cluster.

The URL and setting checks run in every session; the tests taking ``redis_cluster`` run in the
session ``make test`` starts on a 3-master cluster (``WORQR_TEST_REDIS=cluster``)."""

import pytest

from queues.engine import commands, connection, keys, readmodel
from queues.engine.config import Config
from queues.engine.connection import Connection, parse
from queues.engine.errors import ConfigurationError, NotReplicated
from queues.engine.queue import Queue
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
    """A redis+sentinel URL names the Sentinels, the service and the database; sentinel_*
    query options go to the Sentinels, the rest to the master."""
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
    """A malformed cluster or Sentinel URL is a ConfigurationError naming the fault (and never
    showing the password)."""
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
    """With MIN_REPLICAS_ACK above the replicas there are, enqueue WAITs, then raises
    NotReplicated (the task is on the master; the producer is told it may not survive)."""
    replicas = 1 if connection.is_cluster(conn.client) else 0  # the test cluster: one per master
    strict = Connection(conn.url, conn.config.with_(min_replicas_ack=replicas + 1, replicas_ack_timeout=0.5))
    with pytest.raises(NotReplicated) as info:
        Queue("t1", strict).enqueue("x")
    assert (info.value.wanted, info.value.got) == (replicas + 1, replicas)
    assert "a failover now could lose it" in str(info.value)
    assert Queue("t1").counts()["pending"] == 1


# -- on the cluster --------------------------------------------------------------------------


def test_queues_land_on_different_masters(redis_cluster, client):
    """Eight queues spread over the three masters: each queue's keys are on one master, which
    holds them (read on the node itself), and the overview reads them all."""
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


def test_replicated_writes_on_the_cluster_wait_for_the_slot_master_replica(redis_cluster, conn):
    """With MIN_REPLICAS_ACK=1 on the cluster, enqueue and finish WAIT on the master of the
    queue's slot (each master has a replica): nothing raises, and the replica has the task."""
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
    """One worker process serving queues on the three masters runs all their tasks, woken by
    the control channel wherever its queues' scripts publish."""
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
