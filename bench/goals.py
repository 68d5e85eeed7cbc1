"""worqr's performance goals, each against its bound, PASS or FAIL, in one table for `make bench`.

    python bench/goals.py [--since EPOCH]

Reads the newest results of this run's benchmarks in bench/results/ (those started at or after
``--since``; `make bench` passes the time it started): the harness's table (``run-*.json``:
enqueue, drain, idle pickup, and the bare wake-up floors measured in the same run by the floor
rows), the pickup while draining (``busy-*.json``), Redis memory per task and idle worker memory
(``scale-*.json``), the run on Sidekiq's terms (``sidekiq-terms-*.json``) and the features to
come (``future-*.json``). A figure a run did not produce reads "not measured", with the reason.
Standard library only: runs under either interpreter.
"""

import argparse
import datetime
import json
import sys
from pathlib import Path

import verdict

RESULTS = Path(__file__).resolve().parent / "results"
WORQR_ADAPTER = "worqr_adapter"
FLOORS = {"floor-blpop": "BLPOP", "floor-pubsub": "pub/sub to a loop"}
#: The bounds (the performance issue's goals).
DRAIN_SYNC, DRAIN_ASYNC, BULK = 2.0, 3.0, 10.0
PICKUP_OVER_FLOOR_MS, PICKUP_P99_IDLE_MS, PICKUP_P99_BUSY_MS = 0.25, 2.0, 5.0
MEMORY_PER_TASK_B, IDLE_RSS_MIB = 263, 60
#: While draining, a backlog above this share of what was offered means the workers fell behind.
KEPT_UP = 0.01


def newest(results, kind, since):
    """(path, parsed JSON) of the newest <results>/<kind>-<time>.json started at or after ``since``."""
    for path in sorted(Path(results).glob(f"{kind}-*.json"), reverse=True):
        stamp = path.stem[len(kind) + 1 :]
        try:
            started = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%S").timestamp()
        except ValueError:
            continue
        if started >= since:
            return path, json.loads(path.read_text())
        return None, None
    return None, None


def best_peer(run, key):
    """(rate, label) of the fastest peer (not worqr, not a floor row) in ``key``, or None."""
    rates = [
        (s[key], variant)
        for variant, s in run["summary"].items()
        if run["contenders"][variant]["adapter"] != WORQR_ADAPTER and variant not in FLOORS and s.get(key)
    ]
    return max(rates, default=None)


def table_goals(run):
    """The main table's ratios."""
    if run is None:
        why = "no harness run (bench/run.sh) in this run"
        return [verdict.check("drain, enqueue and pickup ratios", None, 1, why=why)]
    s = run["summary"]
    out = []
    for variant, bound, kind in (("worqr", DRAIN_SYNC, "sync"), ("worqr-async", DRAIN_ASYNC, "async")):
        for procs in (1, 2):
            key = f"drain_{procs}p"
            peer = best_peer(run, key)
            mine = s.get(variant, {}).get(key)
            goal = f"drain, {kind} handler, {procs} process{'es' if procs > 1 else ''}: {variant} / best peer"
            goal += f" ({peer[1]}, {peer[0]:,.0f}/s)" if peer else ""
            why = "not in this run" if mine is None else "no peer in this run"
            out.append(
                verdict.check(goal, verdict.ratio(mine, peer and peer[0]), bound, fmt="{:.2f}", unit="×", why=why)
            )
    huey = s.get("huey", {}).get("enqueue_plain")
    mine = s.get("worqr", {}).get("enqueue_plain")
    out.append(
        verdict.check(
            "enqueue one by one: worqr / huey",
            verdict.ratio(mine, huey),
            1.0,
            fmt="{:.2f}",
            unit="×",
            why="worqr and huey both needed",
        )
    )
    peer = best_peer(run, "enqueue_bulk")
    goal = "enqueue in bulk: worqr / best peer" + (f" ({peer[1]}, {peer[0]:,.0f}/s)" if peer else "")
    mine = s.get("worqr", {}).get("enqueue_bulk")
    out.append(
        verdict.check(
            goal,
            verdict.ratio(mine, peer and peer[0]),
            BULK,
            fmt="{:.1f}",
            unit="×",
            why="no peer with a bulk enqueue in this run",
        )
    )
    return out + pickup_goals(s)


def pickup_goals(s):
    floors = {v: (s.get(v) or {}).get("latency_ms") for v in FLOORS}
    out = [
        verdict.info(
            f"bare wake-up floor, {name}: p50 (p99)",
            lat and lat["p50"],
            "-",
            f"p99 {lat['p99']:.2f} ms" if lat else "no floor row in this run",
            unit=" ms",
        )
        for v, name in FLOORS.items()
        for lat in [floors[v]]
    ]
    blpop = floors["floor-blpop"]
    for variant in ("worqr", "worqr-async"):
        lat = (s.get(variant) or {}).get("latency_ms")
        bound = blpop["p50"] + PICKUP_OVER_FLOOR_MS if blpop else 0
        goal = f"idle pickup p50, {variant}: at most the BLPOP floor + {PICKUP_OVER_FLOOR_MS} ms"
        why = "no floor row (floor-blpop) in this run" if lat else "not in this run"
        out.append(verdict.check(goal, lat and blpop and lat["p50"], bound, at_most=True, unit=" ms", why=why))
        out.append(
            verdict.check(
                f"idle pickup p99, {variant}",
                lat and lat["p99"],
                PICKUP_P99_IDLE_MS,
                at_most=True,
                strict=True,
                unit=" ms",
                why="not in this run",
            )
        )
    return out


def busy_goals(busy):
    if busy is None:
        return [
            verdict.check(
                "pickup p99 while draining",
                None,
                PICKUP_P99_BUSY_MS,
                at_most=True,
                strict=True,
                unit=" ms",
                why="bench/busy.py did not run",
            )
        ]
    out, rate = [], busy["args"]["rate"]
    for label, m in busy["contenders"].items():
        goal = f"pickup p99 while draining {rate:,.0f}/s, {label}"
        if "error" in m or not m.get("latency_ms"):
            out.append(
                verdict.check(
                    goal,
                    None,
                    PICKUP_P99_BUSY_MS,
                    at_most=True,
                    strict=True,
                    unit=" ms",
                    why=m.get("error", "no probe finished"),
                )
            )
            continue
        invalid = ""
        if m["backlog_at_stop"] > KEPT_UP * m["sent"] or m["offered_per_s"] < 0.95 * rate:
            invalid = (
                f"the rate was not held (offered {m['offered_per_s']:,.0f}/s, completed "
                f"{m['completed_per_s']:,.0f}/s, backlog {m['backlog_at_stop']:,})"
            )
        out.append(
            verdict.check(
                goal, m["latency_ms"]["p99"], PICKUP_P99_BUSY_MS, at_most=True, strict=True, unit=" ms", invalid=invalid
            )
        )
    return out


def scale_goals(scale):
    mem = (scale or {}).get("memory_per_task", {}).get("worqr")
    rss = (scale or {}).get("idle_rss_mib")
    why = "bench/scale.py did not run" if scale is None else "not measured by bench/scale.py"
    payload = (scale or {}).get("memory_payload_bytes", 100)
    return [
        verdict.check(
            f"Redis memory per pending task ({payload}-byte payload)",
            mem,
            MEMORY_PER_TASK_B,
            at_most=True,
            fmt="{:,.0f}",
            unit=" B",
            why=why,
        ),
        verdict.check(
            "idle worker resident memory", rss, IDLE_RSS_MIB, at_most=True, fmt="{:.1f}", unit=" MiB", why=why
        ),
    ]


def terms_goals(terms):
    if terms is None:
        return [
            verdict.check(
                "on Sidekiq's terms: 1 ms run / 0 ms run", None, 0.70, why="bench/sidekiq_terms.py did not run"
            )
        ]
    why = "its results carry no goal lines (an older bench/sidekiq_terms.py)"
    # the lines bench/sidekiq_terms.py printed under its table
    return terms.get("goals") or [verdict.check("on Sidekiq's terms: 1 ms run / 0 ms run", None, 0.70, why=why)]


def future_goals(future):
    if future is None:
        return [verdict.absent("task controls and chunk handlers", "-", "bench/future.py did not run")]
    out = []
    for key, name in (
        ("throttle", "enqueue with throttle="),
        ("debounce", "enqueue with debounce="),
        ("encryption", "enqueue of 1 KB, encrypted"),
    ):
        m = future.get(key, {})
        if "ratio" in m:
            out.append(verdict.info(f"{name} / plain enqueue", m["ratio"], "-", "no bound given", unit="×"))
        else:
            out.append(verdict.absent(f"{name} / plain enqueue", "-", m.get("why", "not measured")))
    c = future.get("chunk", {})
    for kind in ("sync", "async"):
        goal = f"drain, chunk=100 / one task per call, {kind}"
        if "why" in c:
            out.append(verdict.absent(goal, "≥ 5.00×", c["why"]))
        else:
            out.append(verdict.check(goal, c.get(f"{kind}_ratio"), 5.0, fmt="{:.2f}", unit="×"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--since", type=float, default=0, help="ignore results started before this Unix time")
    ap.add_argument("--results", default=str(RESULTS), help="where the results are (bench/results)")
    a = ap.parse_args()
    found = {kind: newest(a.results, kind, a.since) for kind in ("run", "busy", "scale", "sidekiq-terms", "future")}
    data = {kind: d for kind, (_, d) in found.items()}
    lines = ["## worqr's goals", "", *verdict.HEADER]
    lines += table_goals(data["run"]) + busy_goals(data["busy"]) + scale_goals(data["scale"])
    lines += terms_goals(data["sidekiq-terms"]) + future_goals(data["future"])
    lines.append("\nFrom: " + ", ".join(str(p.name) if p else f"no {kind} results" for kind, (p, _) in found.items()))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
