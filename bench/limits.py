"""The cost of limits for `make bench` (issue 14): a worker's `start` (taking one task) on a queue
with no limits, with a concurrency and a rate, and with 100,000 partitions waiting (runnable in
the ring, or parked at their concurrency). Goal: within 1.5x of the unlimited start.

Run with the project's interpreter:  .venv/bin/python bench/limits.py [--quick]

Starts its own redis-server on a free port. Each sample enqueues one task (untimed), times
`start`, then `finish`es the task; Redis's own time per call comes from SLOWLOG (threshold 0 us),
the client's adds the round trip.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent)]

from bench.scale import pct, start_redis  # noqa: E402

GOAL = 1.5


def out(line=""):
    print(line, flush=True)


def _register(r, queue, worker, **limits):
    from queues.engine import commands
    from queues.engine.limits import check_limits

    spec = check_limits(queue, **limits)
    commands.register(queue, worker, ttl=3600, lock_ttl=35, grace=10, default_timeout=0, fresh=False, limits=spec).run(
        r
    )


def _start(r, queue, worker, count=1):
    from queues.engine import commands

    return commands.start(queue, worker, count, lock_ttl=35, grace=10, default_timeout=0, result_ttl=0).run(r)


def _enqueue_partitioned(r, queue, parts, per_part=1, chunk=2000):
    """``per_part`` tasks in each partition of ``parts``, pipelined (one enqueue call per partition)."""
    from queues.engine import commands
    from queues.engine.queue import new_task_id

    for i in range(0, len(parts), chunk):
        calls = []
        for part in parts[i : i + chunk]:
            items = [(new_task_id(queue), b"x" * 64, "", "") for _ in range(per_part)]
            calls.append(commands.enqueue(queue, items, partition=part))
        commands.run_pipelined(r, calls)


def start_cost(r, queue, samples, partition_of=None):
    """Median / p99 of `start` taking one task. ``partition_of(i)``: the partition of sample i's task."""
    from queues.engine import commands, scripts
    from queues.engine.codes import Code
    from queues.engine.queue import new_task_id

    sha = scripts.load_all()["start"].sha.encode()
    worker = "bench-probe"
    r.config_set("slowlog-max-len", samples * 100)
    r.config_set("slowlog-log-slower-than", 0)
    r.slowlog_reset()
    client_us = []
    try:
        for i in range(samples):
            part = partition_of(i) if partition_of else ""
            commands.enqueue(queue, [(new_task_id(queue), b"x" * 64, "", "")], partition=part).run(r)
            t0 = time.perf_counter()
            reply = _start(r, queue, worker)
            client_us.append((time.perf_counter() - t0) * 1e6)
            (task,) = reply.tasks
            codes = commands.finish(queue, worker, [(task.id, task.lease, "", False)], result_ttl=0).run(r)
            assert reply.status == Code.OK and codes == [Code.COMPLETED], (reply.status, codes)
        log = r.slowlog_get(samples * 100)
    finally:
        r.config_set("slowlog-log-slower-than", 10000)
    server_us = [e["duration"] for e in log if e["command"].split(b" ")[:2] == [b"EVALSHA", sha]]
    return {
        "server_p50": pct(server_us, 50),
        "server_p99": pct(server_us, 99),
        "client_p50": pct(client_us, 50),
        "client_p99": pct(client_us, 99),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=100_000, help="waiting partitions (100,000)")
    ap.add_argument("--samples", type=int, default=2000, help="start calls timed per case (2000)")
    ap.add_argument("--quick", action="store_true", help="small sizes, to try the script")
    args = ap.parse_args()
    if args.quick:
        args.partitions, args.samples = 2000, 200

    workdir = tempfile.mkdtemp(prefix="worqr-bench-limits-")
    server, r, _ = start_redis(workdir)
    try:
        n = args.partitions
        every = lambda task: ""  # noqa: E731 (the partition key comes with each enqueue here)
        cases = []

        _register(r, "plain", "bench-probe")
        cases.append(("no limits", start_cost(r, "plain", args.samples)))

        _register(r, "limited", "bench-probe", concurrency=1000, rate=(1_000_000, 60))
        cases.append(("concurrency=1000, rate=(1,000,000, 60)", start_cost(r, "limited", args.samples)))

        _register(r, "ring", "bench-probe", partition=every, partition_concurrency=1)
        _enqueue_partitioned(r, "ring", [f"c{i}" for i in range(n)])
        cases.append(
            (
                f"{n:,} partitions runnable in the ring",
                start_cost(r, "ring", args.samples, partition_of=lambda i: f"probe{i}"),
            )
        )

        _register(r, "parked", "bench-probe", partition=every, partition_concurrency=1)
        _register(r, "parked", "bench-holder", partition=every, partition_concurrency=1)
        _enqueue_partitioned(r, "parked", [f"c{i}" for i in range(n)], per_part=2)
        while _start(r, "parked", "bench-holder", 1000).tasks or r.llen("worqr:{parked}:ring"):
            pass  # one task of each partition runs; the second one's partition is parked
        parked = r.hlen("worqr:{parked}:partitions")
        cases.append(
            (
                f"{parked:,} partitions parked at their concurrency",
                start_cost(r, "parked", args.samples, partition_of=lambda i: f"probe{i}"),
            )
        )

        base = cases[0][1]["server_p50"]
        out("")
        out(
            "Limits: the cost of a worker's start (taking one task), median over "
            f"{args.samples} calls; goal: within {GOAL}x of no limits"
        )
        out(f"{'case':<48} {'Redis us (p50/p99)':>20} {'round trip us (p50/p99)':>26} {'vs none':>8}")
        worst = 0.0
        for name, c in cases:
            ratio = c["server_p50"] / base if base else 0.0
            worst = max(worst, ratio)
            out(
                f"{name:<48} {c['server_p50']:>10.0f} / {c['server_p99']:<8.0f} "
                f"{c['client_p50']:>13.0f} / {c['client_p99']:<10.0f} {ratio:>7.2f}x"
            )
        out(f"worst: {worst:.2f}x ({'within' if worst <= GOAL else 'OVER'} the {GOAL}x goal)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
