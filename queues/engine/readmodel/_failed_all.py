"""The tasks failed for good across every queue, for the dashboard's Failures tab: bounded
whatever the number of queues and of failed tasks."""

from dataclasses import dataclass

from .. import keys
from ._common import decode, read_tasks
from ._queues import known_queues

#: Queues looked at (by name order) and failed tasks read per queue (its newest).
FAILED_QUEUES_MAX = 1000
FAILED_PER_QUEUE = 20
#: Queues with failed tasks whose newest are read (the most recently failed first).
FAILED_QUEUES_READ = 100


@dataclass
class FailedAll:
    """The newest failed tasks of the queues where something failed most recently (``tasks``),
    the failed count per queue that has any (``counts``), how many queues were looked at out of
    how many, and whether some queues' tasks were left unread (``more_queues``)."""

    tasks: list
    counts: dict
    looked: int
    queues: int
    more_queues: bool


def failed_all(client, per_queue=FAILED_PER_QUEUE, queues_read=FAILED_QUEUES_READ):
    """In at most 3 round trips plus one per queue read: the failed count and newest failure of
    each of the first ``FAILED_QUEUES_MAX`` queues, then the newest ``per_queue`` failed tasks of
    the ``queues_read`` queues whose last failure is the most recent."""
    names = known_queues(client)
    looked = names[:FAILED_QUEUES_MAX]
    p = client.pipeline(transaction=False)
    for q in looked:
        key = keys.queue_key(q, "failed")
        p.zcard(key)
        p.zrevrange(key, 0, 0, withscores=True)
    replies = p.execute()
    counts, newest = {}, {}
    for i, q in enumerate(looked):
        n, head = replies[2 * i], replies[2 * i + 1]
        if n:
            counts[q] = n
            newest[q] = head[0][1] if head else 0
    order = sorted(newest, key=lambda q: newest[q], reverse=True)
    tasks = []
    for q in order[:queues_read]:
        ids = [decode(i) for i in client.zrevrange(keys.queue_key(q, "failed"), 0, per_queue - 1)]
        tasks += read_tasks(client, q, ids, state="failed")
    tasks.sort(key=lambda t: t.failed_at.timestamp() if t.failed_at else 0, reverse=True)
    return FailedAll(tasks, counts, len(looked), len(names), len(order) > queues_read)
