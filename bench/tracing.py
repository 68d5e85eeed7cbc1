"""What OpenTelemetry tracing costs worqr (issue 21): enqueue one by one and drain rate, per mode.

Run with the project's interpreter:  .venv/bin/python bench/tracing.py [--n 5000] [--rounds 5]
    [--modes off,disabled,noop,sdk] [--base /path/to/an/older/checkout]

Starts its own redis-server on a free port. Each round runs every mode once, in turn (so the
machine's load falls on all of them alike), each in a fresh producer process and a fresh
``manage.py worker bench --concurrency 8`` (sync no-op handler, bench/worqr_tasks.py):

1. the queue is paused and the worker started and registered;
2. N tasks are enqueued one by one (``Queue.enqueue``, timed);
3. the queue is resumed and the time until the handler has run N times is the drain time.

Rates are wall-clock; on a shared machine they swing with the load, so the CPU time the producer
spends per enqueue and the worker process per task (user + system, from /proc) is printed too:
it moves much less with the machine's load.

Modes (bench/tracing_settings.py, applied to the producer and the worker alike): ``off``
(opentelemetry not importable), ``disabled`` (``WORQR["OPENTELEMETRY"] = False``), ``noop`` (on,
no SDK: the API's no-op tracer), ``sdk`` (the SDK records every span; a batch processor drops
them). ``--base`` adds ``before``: the same measurement of another checkout (e.g. main before
tracing) with this virtualenv. Prints the median of each mode and its ratio to the first mode.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
PAYLOAD = "x" * 64
QUEUE = "bench"
DONE_KEY = "bench:done"  # bench/common.py: the no-op handler INCRs it


def child(mode, tree, url, n):
    """One measurement in this (fresh) process; prints {"enqueue": /s, "drain": /s}."""
    os.environ["WORQR_BENCH_TRACING"] = mode
    sys.path[:0] = [str(tree), str(BENCH)]
    if mode != "before":
        import tracing_settings  # noqa: F401  (the mode's import block or SDK, for this producer too)
    import redis
    from queues.engine import Config, Connection, Queue

    config = Config(redis_url=url)
    if mode == "disabled":
        config = config.with_(opentelemetry=False)
    q = Queue(QUEUE, Connection(url, config))
    r = redis.Redis.from_url(url)
    r.flushall()
    q.pause()
    settings = "bench.worqr_settings" if mode == "before" else "bench.tracing_settings"
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE=settings,
        WORQR_REDIS_URL=url,
        BENCH_REDIS_URL=url,
        PYTHONPATH=f"{tree}:{tree / 'bench'}",
    )
    worker = subprocess.Popen(
        [sys.executable, str(tree / "manage.py"), "worker", QUEUE, "--concurrency", "8", "--log-level", "WARNING"],
        cwd=tree,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not r.scard("worqr:workers"):
            if time.monotonic() > deadline or worker.poll() is not None:
                raise SystemExit(f"{mode}: the worker did not start")
            time.sleep(0.05)
        t0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            q.enqueue(PAYLOAD)
        enqueue_s, enqueue_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        t0, cpu0 = time.perf_counter(), cpu_seconds(worker.pid)
        q.resume()
        while int(r.get(DONE_KEY) or 0) < n:
            if time.perf_counter() - t0 > 300 or worker.poll() is not None:
                raise SystemExit(f"{mode}: the drain did not finish")
            time.sleep(0.002)
        drain_s, drain_cpu = time.perf_counter() - t0, cpu_seconds(worker.pid) - cpu0
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(30)
    print(
        json.dumps(
            {
                "enqueue": n / enqueue_s,
                "drain": n / drain_s,
                "enqueue_cpu_us": enqueue_cpu / n * 1e6,
                "drain_cpu_us": drain_cpu / n * 1e6,
            }
        )
    )


def cpu_seconds(pid):
    """User + system CPU time a process has used (Linux /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="off,disabled,noop,sdk")
    parser.add_argument("--base", type=Path, help="another checkout to measure as mode 'before'")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, default=PROJECT, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.tree, args.url, args.n)

    sys.path[:0] = [str(PROJECT), str(BENCH)]
    from scale import start_redis

    runs = [("before", args.base)] if args.base else []
    runs += [(mode, PROJECT) for mode in args.modes.split(",")]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a kill still stops our redis-server (finally)
    server, _, url = start_redis(tempfile.mkdtemp(prefix="worqr-bench-tracing-"))
    results = {mode: [] for mode, _ in runs}
    try:
        for i in range(args.rounds):
            for mode, tree in runs:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", mode, "--tree", str(tree), "--url", url, "--n", str(args.n)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                results[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"[tracing] round {i + 1} {mode}: {results[mode][-1]}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    first = runs[0][0]
    columns = ("enqueue", "drain", "enqueue_cpu_us", "drain_cpu_us")
    medians = {m: {k: statistics.median(x[k] for x in rs) for k in columns} for m, rs in results.items()}
    print(f"\nTracing cost: N = {args.n:,}, {args.rounds} interleaved rounds, medians (ratio to {first})")
    print("| mode | enqueue 1-by-1 /s | drain 1 proc /s | producer CPU us/enqueue | worker CPU us/task |")
    print("|---|--:|--:|--:|--:|")
    for mode, med in medians.items():
        cells = [f"{med[k]:,.0f} ({med[k] / medians[first][k]:.2f})" for k in columns]
        print(f"| {mode} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
