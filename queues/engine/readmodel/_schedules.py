"""Reads of schedules (periodic tasks): the global index (name -> queue), and each schedule's
hash and next run as Redis has them; ``engine.schedules`` makes its ``Schedule`` records of them."""

import json

from .. import keys
from ._common import decode


def schedule_index(client):
    """{schedule name: queue} of every schedule (the global index ``keys.SCHEDULES``)."""
    return {decode(k): decode(v) for k, v in client.hgetall(keys.SCHEDULES).items()}


def schedule_queue(client, name):
    """The queue of the schedule called ``name`` (by the global index), or None."""
    return decode(client.hget(keys.SCHEDULES, name))


def schedule_hashes(client, pairs):
    """[(name, queue, hash, next run)] of each (name, queue) of ``pairs``, in one round trip: the
    schedule's hash (its HGETALL reply, empty if it has none) and its score in the queue's
    ``schedules`` zset (None if it is not listed there)."""
    p = client.pipeline(transaction=False)
    for name, queue in pairs:
        p.hgetall(keys.schedule_key(queue, name))
        p.zscore(keys.queue_key(queue, "schedules"), name)
    replies = p.execute() if pairs else []
    return [(name, queue, replies[2 * i], replies[2 * i + 1]) for i, (name, queue) in enumerate(pairs)]


def live_schedules(client, names=None):
    """{name: its settings as given (a dict)} of the schedules made at run time
    (``keys.LIVE_SCHEDULES``; ``engine.live_schedules``), of every one or only of ``names`` (one
    HMGET: a page's); an unreadable entry is left out."""
    if names is None:
        pairs = ((decode(name), raw) for name, raw in client.hgetall(keys.LIVE_SCHEDULES).items())
    else:
        pairs = zip(names, client.hmget(keys.LIVE_SCHEDULES, names) if names else ())
    out = {}
    for name, raw in pairs:
        try:
            settings = json.loads(raw) if raw is not None else None
        except ValueError:
            continue
        if isinstance(settings, dict):
            out[name] = settings
    return out
