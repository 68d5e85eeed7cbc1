"""The histogram of task run durations that the scripts keep per queue (read for ``/metrics``).

``worqr:{<queue>}:durations`` [hash], written by the ``finish``, ``start`` and ``fail`` scripts
(Redis clock, start to outcome) with the bounds below, which the loader writes into the Lua, so
they are defined once:

    ``le:<bound>``  runs that took at most ``<bound>`` seconds and more than the bound before it
                    (not cumulative; ``le:+Inf`` holds the rest)
    ``count``       runs recorded
    ``sum``         their total duration, in seconds (a float)
"""

#: Upper bounds in seconds, from quick handlers to hour-long jobs.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


def bound_text(bound):
    """A bound as the hash field writes it (``'%g'``), ``'+Inf'`` for None."""
    return "+Inf" if bound is None else f"{bound:g}"


def lua_bounds():
    """The bounds as a Lua table body of strings: ``'0.005', '0.01', ...``."""
    return ", ".join(f"'{bound_text(b)}'" for b in BUCKETS)
