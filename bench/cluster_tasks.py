"""No-op handlers for bench/cluster.py's eight queues (installed by bench.cluster_settings)."""

from queues import handler

QUEUES = [f"cq{i}" for i in range(8)]


def noop(task):
    return None


for name in QUEUES:
    handler(name)(noop)
