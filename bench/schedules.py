"""Lateness of periodic tasks (issue 13): how long after its tick each run is enqueued, with
4 workers firing the same schedules.

Run with the project's interpreter:  .venv/bin/python bench/schedules.py [--seconds 60] [--schedules 10]

Starts its own redis-server on a free port and 4 ``manage.py worker bench`` processes
(``bench.schedule_settings``): every worker fires every schedule, so each tick is raced for by
all four and enqueued by the first. The schedules' queue has no worker, so every run stays
pending and its lateness is read exactly from Redis: the task's created time (Redis clock, set
by the script that fired it) minus its tick (in the task's meta). The first 3 s (workers
starting) are left out. Prints p50 / p95 / p99 / max and checks one run per tick.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
sys.path[:0] = [str(PROJECT), str(BENCH)]

from scale import kill_group, start_redis  # noqa: E402

WORKERS = 4


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--schedules", type=int, default=10)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="worqr-bench-schedules-")
    server, r, url = start_redis(workdir)
    env = dict(
        os.environ,
        WORQR_REDIS_URL=url,
        DJANGO_SETTINGS_MODULE="bench.schedule_settings",
        WORQR_BENCH_SCHEDULES=str(args.schedules),
        PYTHONPATH=f"{PROJECT}:{BENCH}",
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(PROJECT / "manage.py"),
                "worker",
                "bench",
                "--log-level",
                "WARNING",
                "--name",
                f"sched-bench-{i}",
            ],
            cwd=PROJECT,
            env=env,
            start_new_session=True,
        )
        for i in range(WORKERS)
    ]
    try:
        deadline = time.time() + 60
        while r.scard("worqr:workers") < WORKERS or r.hlen("worqr:schedules") < args.schedules:
            if time.time() > deadline:
                raise SystemExit("workers did not start")
            time.sleep(0.2)
        start_ms = int(time.time() * 1000) + 3000
        time.sleep(3 + args.seconds)
        end_ms = int(time.time() * 1000) - 1000
    finally:
        for p in procs:
            kill_group(p)
    ids = [i.decode() for i in r.lrange("worqr:{lateness}:pending", 0, -1)]
    p = r.pipeline(transaction=False)
    for task_id in ids:
        p.hmget(f"worqr:{{lateness}}:task:{task_id}", "c", "m")
    late, per_tick = [], {}
    for created, meta in p.execute():
        m = json.loads(meta)
        if start_ms <= m["tick"] <= end_ms:
            late.append(int(created) - m["tick"])
            key = (m["schedule"], m["tick"])
            per_tick[key] = per_tick.get(key, 0) + 1
    server.stop()
    expected = args.schedules * len(range(start_ms - start_ms % 1000 + 1000, end_ms + 1, 1000))
    doubles = sum(1 for n in per_tick.values() if n > 1)
    print(
        f"## schedule lateness (bench/schedules.py; {WORKERS} workers, {args.schedules} schedules every 1 s, "
        f"{args.seconds} s)"
    )
    print(f"runs: {len(late)} of {expected} ticks; ticks with more than one run: {doubles}")
    print(
        f"lateness ms: p50 {statistics.median(late):.1f} / p95 {percentile(late, 95):.1f} / "
        f"p99 {percentile(late, 99):.1f} / max {max(late):.1f}  (target p95 < 100)"
    )


if __name__ == "__main__":
    main()
