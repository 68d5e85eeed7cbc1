"""Reads of a queue's limits: those in force and where they come from (the handler's, the
operator's overrides), their use (slots, starts in the rate's window, tasks held back) and the
partitions' (listed, in the ring, parked, the busiest)."""

from datetime import UTC, datetime

from .. import keys
from ..connection import is_cluster
from ..limits import start_grace_ms
from ._common import decode
from ._queues import queue_counts

_LIMIT_FIELDS = (("concurrency", "c", None), ("rate", "rn", "rw"))


_PARTITION_FIELDS = (("partition_concurrency", "pc", None), ("partition_rate", "prn", "prw"))


def _limit_values(h, prefix):
    """{concurrency, rate, partition_concurrency, partition_rate} from the limits hash's fields
    with ``prefix`` ('' in force, 'h' the handler's, 'o' the overrides: '-' is "none")."""
    out = {}
    for name, count, window in _LIMIT_FIELDS + _PARTITION_FIELDS:
        raw = h.get(prefix + count)
        if raw is None:
            continue
        if raw == "-" or raw == "":
            out[name] = None
        elif window is None:
            out[name] = int(raw)
        else:
            out[name] = [int(raw), int(h.get(prefix + window) or 0) / 1000]
    return out


def limited_queues(client, names):
    """Those of ``names`` that have limits in force (or overrides), in one round trip."""
    p = client.pipeline(transaction=False)
    for name in names:
        p.exists(keys.queue_key(name, "limits"))
    return [name for name, found in zip(names, p.execute()) if found]


#: Parked partitions of each kind (by their concurrency, by their rate) whose tasks ``limits``
#: counts: bounded work per call.
PARKED_COUNTED = 1000


def _parked(client, queue, partition_concurrency):
    """Partitions parked by their concurrency (at most PARKED_COUNTED looked at: those at their
    limit in ``pactive``), and the tasks listed in those and in the ones parked by their rate."""
    parked = list(client.zrange(keys.queue_key(queue, "pwait"), 0, PARKED_COUNTED - 1))
    at_concurrency = 0
    if partition_concurrency is not None:
        at_limit = client.zrangebyscore(
            keys.queue_key(queue, "pactive"), partition_concurrency, "+inf", start=0, num=PARKED_COUNTED
        )
        if at_limit:
            states = client.hmget(keys.queue_key(queue, "partitions"), at_limit)
            blocked = [k for k, state in zip(at_limit, states, strict=True) if decode(state) == "b"]
            at_concurrency = len(blocked)
            parked += blocked
    if not parked:
        return at_concurrency, 0
    p = client.pipeline(transaction=False)
    for k in parked:
        p.llen(keys.partition_list_key(queue, decode(k)))
    return at_concurrency, sum(p.execute())


def limits(client, queue, busiest=10):
    """The queue's limits and their use: the limits in force (``concurrency``, ``rate`` as
    [starts, seconds], ``partition_concurrency``, ``partition_rate``; None: no limit), where they
    come from (``handler``, ``overrides``), ``active`` (the slots in use under the concurrency:
    active tasks, and ``kept``: handlers still running after their outcome was recorded, a
    timeout or a cancel of a sync handler, until they return), ``starts_in_window`` (None without
    a rate), ``held_back`` (runnable tasks the queue's own limits hold back now), and
    ``partitions``: listed (with tasks runnable), in the ring, held back, parked by their
    concurrency (``at_concurrency``) and by their rate (``rate_waiting``), the tasks listed in
    parked partitions (``held_back_tasks``: entries of removed tasks included; at most
    ``PARKED_COUNTED`` partitions of each kind are counted, a lower bound beyond), the most
    active tasks of one partition (``most_active``) and the busiest."""
    lk = keys.queue_key(queue, "limits")
    if is_cluster(client):  # a cluster transaction takes no keyless command: TIME goes alone
        raw, (secs, micros) = client.hgetall(lk), client.time()
    else:
        p = client.pipeline(transaction=True)
        p.hgetall(lk)
        p.time()
        raw, (secs, micros) = p.execute()
    h = {decode(k): decode(v) for k, v in raw.items()}
    now = secs * 1000 + micros // 1000
    in_force = {name: None for name, _, _ in _LIMIT_FIELDS + _PARTITION_FIELDS}
    in_force.update(_limit_values(h, ""))
    handler = {name: None for name in in_force}
    handler.update(_limit_values(h, "h"))
    p = client.pipeline(transaction=True)
    p.zcard(keys.queue_key(queue, "active"))
    p.hlen(keys.queue_key(queue, "kept"))
    rate = in_force["rate"]
    window = int(h.get("rw") or 0)
    window += start_grace_ms(window) if window else 0  # what Redis counts starts over
    p.zcount(keys.queue_key(queue, "starts"), f"({now - window}", "+inf")
    p.hlen(keys.queue_key(queue, "partitions"))
    p.llen(keys.queue_key(queue, "ring"))
    p.zcard(keys.queue_key(queue, "pwait"))
    p.zrevrange(keys.queue_key(queue, "pactive"), 0, max(busiest, 1) - 1, withscores=True)
    active, kept, starts, listed, ring, rate_waiting, top = p.execute()
    active += kept
    at_concurrency, held_back_tasks = _parked(client, queue, in_force["partition_concurrency"]) if listed else (0, 0)
    counts = queue_counts(client, queue)
    room = None
    if in_force["concurrency"] is not None:
        room = in_force["concurrency"] - active
    if rate is not None:
        room = min(rate[0] - starts, room if room is not None else rate[0] - starts)
    held_back = counts["runnable"] if room is not None and room <= 0 else 0
    return dict(
        in_force,
        handler=handler,
        overrides=_limit_values(h, "o"),
        active=active,
        kept=kept,
        starts_in_window=starts if rate is not None else None,
        held_back=held_back,
        runnable=counts["runnable"],
        partitions={
            "listed": listed,
            "in_ring": ring,
            "held_back": max(0, listed - ring),
            "rate_waiting": rate_waiting,
            "at_concurrency": at_concurrency,
            "held_back_tasks": held_back_tasks,
            "most_active": int(top[0][1]) if top else 0,
            "busiest": [{"key": decode(k), "active": int(n)} for k, n in top][:busiest],
        },
        held_until=_held_until(h.get("hu"), now),
        held_partitions=_held_partitions(client, queue, now),
    )


def _held_until(ms, now):
    """A hold's end (``RateLimited``) as an aware datetime, or None once it has passed."""
    if ms is None or int(float(ms)) <= now:
        return None
    return datetime.fromtimestamp(int(float(ms)) / 1000, tz=UTC)


#: Partitions held by a RateLimited listed by ``limits`` (the soonest to end first) at most.
HELD_SHOWN = 20


def _held_partitions(client, queue, now):
    """{partition key: held until} of the partitions a handler's RateLimited holds back now
    (``holds``; at most ``HELD_SHOWN``, from a bounded read)."""
    _, raw = client.hscan(keys.queue_key(queue, "holds"), 0, count=200)
    held = {decode(k): _held_until(v, now) for k, v in raw.items()}
    return dict(sorted(((k, v) for k, v in held.items() if v), key=lambda kv: kv[1])[:HELD_SHOWN])
