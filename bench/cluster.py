"""worqr on a Redis Cluster vs one Redis, for `make bench` (issue 16).

Run with the project's interpreter:  .venv/bin/python bench/cluster.py [--quick]

Starts, from the redis-server the tests use, one Redis and then a Redis Cluster of 3 masters (no
replicas, so that every master's CPU is worqr's own work), and on each:

- enqueues N tasks to each of 8 queues (cq0 ... cq7; on the cluster they spread over the three
  masters by their hash tags), then drains them with 2 worker processes serving all 8 queues;
- reports the enqueue and drain throughput, and the Redis CPU time per task on each master
  (INFO cpu: used_cpu_user + used_cpu_sys, before and after, divided by the tasks), which shows
  how the engine's Redis work divides over the masters even on a machine too small for the
  cluster to go faster end to end;
- on the cluster, the cost of a plain PUBLISH (relayed to every node over the cluster bus) vs a
  sharded SPUBLISH (kept in the slot's shard): total CPU over the nodes per message.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
sys.path[:0] = [str(PROJECT)]

from queues.engine import connection, readmodel  # noqa: E402
from queues.engine.config import Config  # noqa: E402
from queues.engine.queue import Queue  # noqa: E402
from queues.testing import RedisServer  # noqa: E402
from tests.cluster_servers import RedisCluster  # noqa: E402

QUEUES = [f"cq{i}" for i in range(8)]


def cpu(port):
    import redis

    info = redis.Redis(port=port).info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def run(label, url, ports, n, workers, concurrency):
    conn = connection.configure(Config(redis_url=url), url)
    client = conn.client
    client.flushall()
    placement = {}
    if connection.is_cluster(client):
        for q in QUEUES:
            placement.setdefault(client.get_node_from_key(f"worqr:{{{q}}}:pending").port, []).append(q)
    before = {p: cpu(p) for p in ports}
    t0 = time.perf_counter()
    for q in QUEUES:
        queue = Queue(q)
        for start in range(0, n, 500):
            queue.enqueue_many(["x"] * min(500, n - start))
    enqueue_s = time.perf_counter() - t0
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.cluster_settings",
        "WORQR_REDIS_URL": url,
        "PYTHONPATH": str(PROJECT),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, str(PROJECT / "manage.py"), "worker", *QUEUES, "--concurrency", str(concurrency)],
            cwd=PROJECT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    total = n * len(QUEUES)
    try:
        t1, started = time.perf_counter(), None
        while True:
            done = sum(q["completed"] for q in readmodel.overview(client))
            if started is None and done:
                started = time.perf_counter()
            if done >= total:
                break
            if time.perf_counter() - t1 > 600:
                raise RuntimeError(f"{label}: drain did not finish ({done} of {total})")
            time.sleep(0.05)
        drain_s = time.perf_counter() - (started or t1)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(20)
    after = {p: cpu(p) for p in ports}
    per_task = {p: (after[p] - before[p]) / total * 1e6 for p in ports}
    return {
        "label": label,
        "tasks": total,
        "enqueue_per_s": total / enqueue_s,
        "drain_per_s": total / drain_s,
        "cpu_us_per_task": per_task,
        "placement": placement,
    }


def pubsub_cost(cluster, messages):
    """Total CPU over every node per message: PUBLISH (relayed to all nodes) vs SPUBLISH."""
    import redis

    client = redis.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    ports = [n.port for n in cluster.nodes]
    channel = "worqr:{cq0}:events"
    out = {}
    for name, send in (("PUBLISH", client.publish), ("SPUBLISH", client.spublish)):
        before = sum(cpu(p) for p in ports)
        for _ in range(messages):
            send(channel, "e cq0 x")
        out[name] = (sum(cpu(p) for p in ports) - before) / messages * 1e6
    client.close()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tasks (a smoke run)")
    parser.add_argument("--n", type=int, help="tasks per queue (default 2500, --quick 300)")
    args = parser.parse_args()
    n = args.n or (300 if args.quick else 2500)
    rows = []
    single = RedisServer().start()
    try:
        rows.append(run("1 Redis", single.url, [single.port], n, workers=2, concurrency=16))
    finally:
        single.stop()
    cluster = RedisCluster(replicas=0).start()
    try:
        rows.append(
            run("Cluster, 3 masters", cluster.url, [x.port for x in cluster.nodes], n, workers=2, concurrency=16)
        )
        pub = pubsub_cost(cluster, 2000 if args.quick else 20000)
    finally:
        cluster.stop()
    print(f"\n## worqr on a Redis Cluster (8 queues, {n} no-op tasks each, 2 workers x 16)\n")
    print("| Redis | enqueue tasks/s | drain tasks/s | Redis CPU per task, per node (us) | total (us) |")
    print("|---|---:|---:|---|---:|")
    for r in rows:
        nodes = " / ".join(f"{v:.1f}" for v in r["cpu_us_per_task"].values())
        total = sum(r["cpu_us_per_task"].values())
        print(f"| {r['label']} | {r['enqueue_per_s']:.0f} | {r['drain_per_s']:.0f} | {nodes} | {total:.1f} |")
    placement = rows[1]["placement"]
    print("\nQueues per master: " + "; ".join(f"{', '.join(qs)}" for qs in placement.values()))
    print(
        f"\nPub/sub on the cluster (3 masters), CPU over all nodes per message: PUBLISH {pub['PUBLISH']:.1f} us, "
        f"SPUBLISH {pub['SPUBLISH']:.1f} us"
    )


if __name__ == "__main__":
    main()
