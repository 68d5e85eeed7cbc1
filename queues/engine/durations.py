"""The histogram of task run durations that the scripts keep per queue (read for ``/metrics``).

``worqr:{<queue>}:durations`` [hash], written by the ``finish``, ``start`` and ``fail`` scripts
(Redis clock, start to outcome) with the bounds below, which the loader writes into the Lua, so
they are defined once:

    ``le:<bound>``  runs that took at most ``<bound>`` seconds and more than the bound before it
                    (not cumulative; ``le:+Inf`` holds the rest)
    ``count``       runs recorded
    ``sum``         their total duration, in seconds (a float)

The same bounds bin the charts' run and wait times over time (``worqr:{<queue>}:timings``
[hash], written by ``finish``, ``start`` and ``fail``; ``lua/includes/stats.lua``): one
histogram per time bucket at three levels (``TIMING_LEVELS``), fields
``<level><bucket>:<r|w><bin>`` (``r``: run time, start to outcome; ``w``: wait time, from when
the task was ready to run, its enqueue or due time, to its start; ``<bin>``: 1 to
``len(BUCKETS) + 1``, the last for times over the last bound). A call writes the current
minute only; ``@m`` is the newest minute written, and the first write of a later minute rolls
``@m`` up into its quarter hour and hour and drops the buckets that left each level's span. So
the hash holds at most ``sum(kept) * 2 * (len(BUCKETS) + 1)`` counters (11,016; a few per
bucket in practice) and expires 8 days after its last write.

Per handler: a queue served by the Tasks framework backend runs many functions (one ``@task``
each, named by its module path); the worker sends each outcome's function name (``handler_name``)
and the scripts keep the same histograms for it in the same hash, under its slot ``<k>.``
(``<k>.<level><bucket>:<r|w><bin>``, its own ``<k>.@m``), with two counters per bucket,
``<k>.<level><bucket>:c`` completed and ``:f`` failed attempts. ``@n:<name>`` gives a name its
slot, ``@k<k>`` the name of a slot and ``@nc`` how many slots are given: at most
``HANDLERS_MAX`` per queue, the names after those counted together in slot 0 (``other``). So a
handler adds ``2 * (len(BUCKETS) + 1) + 2`` counters per bucket at most, and the hash holds at
most ``HANDLERS_MAX + 2`` times as many as the queue's alone. A finish with a handler name runs
one HGET (its slot) and one HINCRBY per bin and count it touches more.
"""

import re

#: Upper bounds in seconds, from quick handlers to hour-long jobs.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


#: The charts' levels: (tag, bucket minutes, buckets kept), one per span the history shows
#: (``readmodel.HISTORY_SPANS``: 1 h by the minute, 24 h by quarter hours, 7 d by hours).
TIMING_LEVELS = (("m", 1, 60), ("q", 15, 96), ("h", 60, 168))
#: How long a queue's timings outlive their last write (ms).
TIMINGS_TTL_MS = 8 * 86_400_000


#: The handlers a queue's timings keep apart (the others are counted together as ``OTHER``).
HANDLERS_MAX = 50
#: A handler name: a Python dotted path with at least one dot (a Tasks framework function's
#: module path), so never ``OTHER``.
HANDLER_NAME_MAX = 200
_HANDLER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
#: The name the handlers past ``HANDLERS_MAX`` are shown under (slot 0).
OTHER = "other"


def is_handler_name(name):
    """Whether ``name`` can name a handler: a dotted Python path (``app.tasks.send``) of at most
    200 characters."""
    return isinstance(name, str) and len(name) <= HANDLER_NAME_MAX and bool(_HANDLER_RE.fullmatch(name))


def timing_field(level, bucket, kind, bin_="", slot=None):
    """A counter of the timings hash: ``m29412345:r3``; in a handler's slot ``3.m29412345:r3``."""
    return f"{'' if slot is None else f'{slot}.'}{level}{bucket}:{kind}{bin_}"


def bound_text(bound):
    """A bound as the hash field writes it (``'%g'``), ``'+Inf'`` for None."""
    return "+Inf" if bound is None else f"{bound:g}"


def lua_bounds():
    """The bounds as a Lua table body of strings: ``'0.005', '0.01', ...``."""
    return ", ".join(f"'{bound_text(b)}'" for b in BUCKETS)


def lua_limits():
    """The bounds as a Lua table body of numbers, in the order of ``lua_bounds``: what a duration
    is compared with (a number literal is read once, when the script is compiled)."""
    return ", ".join(bound_text(b) for b in BUCKETS)


def lua_levels():
    """The levels as a Lua table body: ``{'m', 60000, 60}, ...`` (bucket width in ms)."""
    return ", ".join(f"{{'{tag}', {minutes * 60000}, {kept}}}" for tag, minutes, kept in TIMING_LEVELS)


def quantile(counts, q):
    """The ``q`` quantile (0 to 1) of a histogram under ``BUCKETS``: ``counts[i]`` runs in bin
    ``i`` (not cumulative; the last, past the last bound). Linear within the bin that holds the
    rank (its lower bound is the bound before it, 0 for the first); in the open last bin, the last
    bound. None for an empty histogram. The precision is the bin's width."""
    total = sum(counts)
    if not total:
        return None
    rank, seen = q * total, 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            if i >= len(BUCKETS):
                return BUCKETS[-1]
            low = BUCKETS[i - 1] if i else 0.0
            return low + (BUCKETS[i] - low) * max(0.0, rank - seen) / n
        seen += n
    return BUCKETS[-1]
