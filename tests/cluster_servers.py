"""Real distributed Redis for the tests, from the same redis-server the suite uses
(``queues.testing.redis_binary``): a Redis Cluster of 3 masters and 3 replicas, and a master with a
replica watched by 3 Sentinels. Each node is a process on a free port that the tests can kill -9
and restart; ``stop()`` ends them all and removes their files."""

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time

import redis

from queues.testing import redis_binary

#: Node timeout of the test cluster and Sentinels' down-after, in ms: short, so that a failover
#: takes a couple of seconds (production uses the defaults, 15 s and 30 s).
NODE_TIMEOUT_MS = 1000


def free_port():
    """A free port whose cluster bus port (port + 10000) is free too."""
    while True:
        port = random.randint(20000, 50000)
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port


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


class Node:
    """One redis-server process (a data node or a Sentinel) on its own port and directory."""

    def __init__(self, root, args, sentinel_conf=None):
        self.port = free_port()
        self.dir = os.path.join(root, str(self.port))
        os.makedirs(self.dir)
        self.args = args
        self.sentinel_conf = sentinel_conf
        self.proc = None

    def start(self):
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
        _wait(lambda: self.client(0.2).ping(), 10, f"redis-server on port {self.port}")
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
            ["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas), "--cluster-yes"],
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
    """A master and a replica (or more), watched by 3 Sentinels (quorum 2) as ``mymaster``."""

    SERVICE = "mymaster"

    def __init__(self, sentinels=3, replicas=1):
        self.root = tempfile.mkdtemp(prefix="worqr-test-sentinel-")
        self.master = Node(self.root, _DATA)
        self.replicas = [Node(self.root, _DATA) for _ in range(replicas)]
        conf = (
            f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.master.port} 2\n"
            f"sentinel down-after-milliseconds {self.SERVICE} {NODE_TIMEOUT_MS}\n"
            f"sentinel failover-timeout {self.SERVICE} 5000\n"
            f"sentinel parallel-syncs {self.SERVICE} 1\n"
        )
        self.sentinels = [Node(self.root, [], sentinel_conf=conf) for _ in range(sentinels)]

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
        for s in self.sentinels:
            s.start()
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
            )

        _wait(ready, timeout, "the Sentinels to agree on a master with a replica")

    def failover(self):
        """SENTINEL FAILOVER: a planned switch to the replica."""
        self.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", self.SERVICE)

    def restart_as_replica(self, node):
        """Start a killed data node again; the Sentinels make it a replica of the new master."""
        node.args = list(_DATA)
        node.start()

    def stop(self):
        for n in [*self.sentinels, *self.data_nodes]:
            n.stop()
        shutil.rmtree(self.root, ignore_errors=True)
