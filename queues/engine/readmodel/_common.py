"""What the readers share: text from Redis's replies, Redis's clock, and tasks read by id."""

from .. import keys
from ..replies import decode
from ..task import Task

__all__ = ["decode", "server_ms", "read_tasks", "subscriber_connections"]


def server_ms(client):
    """Redis's clock, in Unix ms (every time worqr stores comes from it)."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def read_tasks(client, queue, ids, state=None):
    """The tasks of ``queue`` with ``ids`` (in order, in one round trip), those gone left out;
    only those in ``state`` if given."""
    p = client.pipeline(transaction=False)
    for tid in ids:
        p.hgetall(keys.task_key(queue, decode(tid)))
    tasks = (Task.from_hash(decode(i), queue, h) for i, h in zip(ids, p.execute()))
    return [t for t in tasks if t and (state is None or t.state == state)]


def subscriber_connections(client):
    """How many connections to the (node of the) client hold a pub/sub subscription."""
    return sum(1 for c in client.client_list() if int(c.get("sub", 0)) + int(c.get("psub", 0)))
