"""Reads of what happened over time: throughput per minute (summed over queues), a queue's
history over an hour, a day or a week (throughput, failures and the depth samples the workers'
upkeep takes: ``engine.upkeep``), and run durations (the histograms, and percentiles from them)."""

import json

from .. import durations as _durations
from .. import keys
from ._common import server_ms


def throughput(client, queues, minutes=60, now_ms=None):
    """Completed and failed attempts per minute over the last ``minutes``, summed over
    ``queues``, in one round trip: {start_ms, completed: [...], failed: [...]} (oldest first)."""
    now_ms = server_ms(client) if now_ms is None else now_ms
    m_now = now_ms // 60000
    span = range(m_now - minutes + 1, m_now + 1)
    fields = [f"{kind}{m}" for m in span for kind in ("c", "f")]
    p = client.pipeline(transaction=False)
    for q in queues:
        p.hmget(keys.queue_key(q, "throughput"), fields)
    completed, failed = [0] * minutes, [0] * minutes
    for values in p.execute():
        for i in range(minutes):
            completed[i] += int(values[2 * i] or 0)
            failed[i] += int(values[2 * i + 1] or 0)
    return {"start_ms": span[0] * 60000, "completed": completed, "failed": failed}


def durations(client, queues):
    """{queue: (cumulative [(bound text, count)] ending with '+Inf', sum of seconds)} for the
    queues that have recorded runs."""
    p = client.pipeline(transaction=False)
    for queue in queues:
        p.hgetall(keys.queue_key(queue, "durations"))
    out = {}
    for queue, h in zip(queues, p.execute(), strict=True):
        if not h:
            continue
        total, buckets = 0, []
        for bound in (*_durations.BUCKETS, None):
            text = _durations.bound_text(bound)
            total += int(h.get(f"le:{text}".encode(), 0))
            buckets.append((text, total))
        out[queue] = (buckets, float(h.get(b"sum", 0)))
    return out


#: The spans a history shows: (bucket minutes, buckets).
HISTORY_SPANS = {"1h": (1, 60), "24h": (15, 96), "7d": (60, 168)}


def history(client, queue, span="1h", now_ms=None):
    """Throughput, failures and depth of ``queue`` over ``span`` ("1h", "24h" or "7d"), oldest
    first: {span, bucket_minutes, start_ms, completed: [...], failed: [...], depth: [... or None]}.
    1 h and 24 h read the per-minute counters (24 h summed by quarter hours), 7 d the hourly
    ones; depth is the sample at each bucket's start (None where none was taken)."""
    if span not in HISTORY_SPANS:
        raise ValueError(f"span must be one of {', '.join(HISTORY_SPANS)}, not {span!r}")
    width, n = HISTORY_SPANS[span]
    now_ms = server_ms(client) if now_ms is None else now_ms
    tkey, dkey = keys.queue_key(queue, "throughput"), keys.queue_key(queue, "depth")
    if span == "7d":
        h_now = now_ms // 3600000
        hours = list(range(h_now - n + 1, h_now + 1))
        p = client.pipeline(transaction=False)
        p.hmget(tkey, [f"{k}{h}" for h in hours for k in ("C", "F")])
        p.hmget(dkey, [f"h{h}" for h in hours])
        counters, depth = p.execute()
        completed = [int(counters[2 * i] or 0) for i in range(n)]
        failed = [int(counters[2 * i + 1] or 0) for i in range(n)]
        start_ms = hours[0] * 3600000
    else:
        m_now = now_ms // 60000
        first = (m_now // width) * width - (n - 1) * width
        minutes = list(range(first, first + n * width))
        p = client.pipeline(transaction=False)
        p.hmget(tkey, [f"{k}{m}" for m in minutes for k in ("c", "f")])
        p.hmget(dkey, [f"m{m}" for m in minutes[::width]])
        counters, depth = p.execute()
        completed = [sum(int(counters[2 * j] or 0) for j in range(i * width, (i + 1) * width)) for i in range(n)]
        failed = [sum(int(counters[2 * j + 1] or 0) for j in range(i * width, (i + 1) * width)) for i in range(n)]
        start_ms = first * 60000
    return {
        "span": span,
        "bucket_minutes": width,
        "start_ms": start_ms,
        "completed": completed,
        "failed": failed,
        "depth": [None if d is None else int(d) for d in depth],
    }


#: The span -> its level of the timings (``durations.TIMING_LEVELS``).
_TIMING_LEVEL_OF = {"1h": "m", "24h": "q", "7d": "h"}
#: The percentiles the charts draw.
TIMING_QUANTILES = (0.5, 0.95, 0.99)


def timings(client, queue, span="1h", now_ms=None, slot=None):
    """Run and wait time percentiles of ``queue`` over ``span``, one point per bucket of its
    history (the same buckets as ``history``), oldest first:
    {span, bucket_minutes, start_ms, run: {count, p50, p95, p99}, wait: {...}}, each a list
    with None where no task ran (seconds; from the per-bucket histograms, ``durations.quantile``).
    ``slot``: one handler's (``handler_slot``), whose reading also has ``completed`` and
    ``failed`` (attempts per bucket). One HMGET (two more for 24 h and 7 d: the newest minute,
    not rolled up yet)."""
    if span not in HISTORY_SPANS:
        raise ValueError(f"span must be one of {', '.join(HISTORY_SPANS)}, not {span!r}")
    width, n = HISTORY_SPANS[span]
    tag = _TIMING_LEVEL_OF[span]
    now_ms = server_ms(client) if now_ms is None else now_ms
    last = now_ms // (width * 60000)
    buckets = range(last - n + 1, last + 1)
    bins = len(_durations.BUCKETS) + 1
    key = keys.queue_key(queue, "timings")
    # per bucket: the run bins, the wait bins, and a handler's two counts
    kinds = [("r", i) for i in range(1, bins + 1)] + [("w", i) for i in range(1, bins + 1)]
    if slot is not None:
        kinds += [("c", ""), ("f", "")]
    size = len(kinds)
    fields = [_durations.timing_field(tag, b, kind, i, slot) for b in buckets for kind, i in kinds]
    values = [int(v or 0) for v in client.hmget(key, fields)]
    if tag != "m":  # the newest minute is not rolled up yet: add it to its bucket
        newest = client.hget(key, "@m" if slot is None else f"{slot}.@m")
        j = int(newest) // width - buckets[0] if newest is not None else -1
        if 0 <= j < n:
            minute = [_durations.timing_field("m", int(newest), kind, i, slot) for kind, i in kinds]
            for i, v in enumerate(client.hmget(key, minute)):
                values[j * size + i] += int(v or 0)
    out = {"span": span, "bucket_minutes": width, "start_ms": buckets[0] * width * 60000}
    for k, kind in enumerate(("run", "wait")):
        series = {"count": []} | {f"p{round(q * 100)}": [] for q in TIMING_QUANTILES}
        for j in range(n):
            at = j * size + k * bins
            counts = values[at : at + bins]
            series["count"].append(sum(counts))
            for q in TIMING_QUANTILES:
                series[f"p{round(q * 100)}"].append(_durations.quantile(counts, q))
        out[kind] = series
    if slot is not None:
        out["completed"] = [values[j * size + 2 * bins] for j in range(n)]
        out["failed"] = [values[j * size + 2 * bins + 1] for j in range(n)]
    return out


def handlers(client, queue):
    """The handlers whose timings ``queue`` keeps apart (``durations``: Tasks framework functions):
    [(name, slot)] in the order first seen, and (``durations.OTHER``, 0) last if some were past
    ``HANDLERS_MAX``. Two commands."""
    key = keys.queue_key(queue, "timings")
    p = client.pipeline(transaction=False)
    p.hmget(key, [f"@k{k}" for k in range(1, _durations.HANDLERS_MAX + 1)])
    p.hexists(key, "0.@m")
    names, other = p.execute()
    out = [(name.decode(), k) for k, name in enumerate(names, 1) if name is not None]
    return out + [(_durations.OTHER, 0)] if other else out


def handler_slot(client, queue, name):
    """The slot of handler ``name`` in ``queue``'s timings (0 for ``durations.OTHER`` once some
    handler was counted there), or None if none is kept for it."""
    key = keys.queue_key(queue, "timings")
    if name == _durations.OTHER:
        return 0 if client.hexists(key, "0.@m") else None
    if not _durations.is_handler_name(name):
        return None
    slot = client.hget(key, f"@n:{name}")
    return None if slot is None else int(slot)


def duration_percentiles(client, queue, quantiles=(0.5, 0.9, 0.99)):
    """Run-duration percentiles of ``queue`` (seconds), estimated from the histogram the scripts
    keep (linear within a bucket; the open last bucket gives its lower bound): {count, mean,
    p50, p90, p99}, or None before the first run."""
    found = durations(client, [queue]).get(queue)
    if not found:
        return None
    buckets, total_s = found
    count = buckets[-1][1]
    if not count:
        return None
    out = {"count": count, "mean": total_s / count}
    bounds = [0.0, *(_durations.BUCKETS)]
    for q in quantiles:
        rank, previous = q * count, 0
        for i, (_, cumulative) in enumerate(buckets):
            if cumulative >= rank:
                low = bounds[i] if i < len(bounds) else bounds[-1]
                if i >= len(_durations.BUCKETS):  # past the last bound: its lower bound
                    value = low
                else:
                    high = _durations.BUCKETS[i]
                    inside = cumulative - previous
                    value = low + (high - low) * ((rank - previous) / inside if inside else 1)
                out[f"p{round(q * 100):g}"] = value
                break
            previous = cumulative
    return out


def deploys(client, start_ms, end_ms):
    """[{label, at (ms)}] of the deploys marked between ``start_ms`` and ``end_ms`` (``deploys.py``),
    oldest first, at most 100."""
    out = []
    for raw in client.zrangebyscore(keys.DEPLOYS, start_ms, end_ms, start=0, num=100):
        try:
            d = json.loads(raw)
            out.append({"label": str(d["label"]), "at": int(d["at"])})
        except (ValueError, KeyError, TypeError):
            continue
    return out
