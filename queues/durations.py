"""Task run durations per queue, kept in Redis as a histogram for ``/metrics``.

The engine's ``finish`` and ``fail`` scripts record every run (Redis clock, start to outcome)
in this format; this module reads it (``record`` is kept for tools that time runs themselves):

``worqr:{<queue>}:durations`` [hash]
    ``le:<bound>``  runs that took at most ``<bound>`` seconds and more than the bound before it
                    (not cumulative; ``le:+Inf`` holds the rest)
    ``count``       runs recorded
    ``sum``         their total duration, in seconds (a float)
"""

import bisect

from .engine import keys

#: Upper bounds in seconds, from quick handlers to hour-long jobs.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


def key(queue):
    return keys.queue_key(queue, "durations")


def _field(bound):
    return "le:+Inf" if bound is None else f"le:{bound:g}"


def record(client, queue, seconds):
    """Count one run of ``seconds`` on ``queue`` (one round trip)."""
    i = bisect.bisect_left(BUCKETS, seconds)
    bound = BUCKETS[i] if i < len(BUCKETS) else None
    p = client.pipeline(transaction=True)
    p.hincrby(key(queue), _field(bound), 1)
    p.hincrby(key(queue), "count", 1)
    p.hincrbyfloat(key(queue), "sum", seconds)
    p.execute()


def read(client, queues):
    """{queue: (cumulative [(bound text, count)] ending with '+Inf', sum)} for queues with runs."""
    p = client.pipeline(transaction=False)
    for queue in queues:
        p.hgetall(key(queue))
    out = {}
    for queue, h in zip(queues, p.execute(), strict=True):
        if not h:
            continue
        total, buckets = 0, []
        for bound in (*BUCKETS, None):
            total += int(h.get(_field(bound).encode(), 0))
            buckets.append(("+Inf" if bound is None else f"{bound:g}", total))
        out[queue] = (buckets, float(h.get(b"sum", 0)))
    return out
