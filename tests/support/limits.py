"""Limits driven through the scripts directly (no worker process), and the overlap of handler runs."""

from queues.engine import commands
from queues.engine.limits import check_limits
from tests.engine_calls import GRACE, LOCK_TTL

WORKER = "w"


def noop(task):
    return None


def customer(task):
    return task.payload.split(":")[0]


def register(client, queue, worker=WORKER, **limits):
    spec = check_limits(queue, **limits)
    commands.register(
        queue, worker, ttl=60, lock_ttl=LOCK_TTL, grace=GRACE, default_timeout=0, fresh=False, limits=spec
    ).run(client)


def start(client, queue, count, worker=WORKER):
    return commands.start(queue, worker, count, lock_ttl=LOCK_TTL, grace=GRACE, default_timeout=0, result_ttl=60).run(
        client
    )


def overlap(recs):
    """The most handler runs in progress at one moment."""
    events = sorted([(r["start"], 1) for r in recs] + [(r["end"], -1) for r in recs], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most
