"""What one ``start`` call costs inside Redis: the time Redis spent in the script per call
(``INFO commandstats``, EVALSHA's usec_per_call) and the Redis commands it ran, for a call that
takes nothing, one task and eight tasks, against two baselines with the same 24 keys: a script
that returns at once, and one that only reads the clock (as every worqr script does first).
The difference between the empty call and the clock-only script is the script's fixed cost: its
prelude, which makes the script's helper functions anew on every call.

    .venv/bin/python bench/call_cost.py [--calls 500] [--port PORT]

Runs on a private ``redis-server`` (``--port``, a free one by default), with worqr's engine
straight (no worker).
"""

import argparse
import shutil
import sys
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.engine import Connection, Queue, commands  # noqa: E402
from queues.testing import RedisServer  # noqa: E402

QUEUE, WORKER = "call-cost", "call-cost-worker"


def _evalsha_stats(r):
    stats = r.info("commandstats")
    return {k[len("cmdstat_") :]: v["calls"] for k, v in stats.items()}, stats.get("cmdstat_evalsha", {})


def _measure(r, call, calls):
    call()  # loaded and warm
    r.config_resetstat()
    for _ in range(calls):
        call()
    counts, evalsha = _evalsha_stats(r)
    commands_per_call = sum(n for name, n in counts.items() if name not in ("config|resetstat", "info")) / calls
    return evalsha.get("usec_per_call", 0.0), commands_per_call


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=500, help="calls per case (500)")
    ap.add_argument("--port", type=int, help="the private redis-server's port (a free one)")
    a = ap.parse_args()
    server = RedisServer(port=a.port).start()
    try:
        r = redis.Redis(port=server.port)
        commands.register(QUEUE, WORKER, ttl=600, lock_ttl=35, grace=1, default_timeout=0, fresh=True).run(r)
        Queue(QUEUE, Connection(server.url)).enqueue_many(["x"] * (a.calls * 10 + 100))

        def start(n):
            return lambda: commands.start(QUEUE, WORKER, n, lock_ttl=35, grace=1, default_timeout=0, result_ttl=60).run(
                r
            )

        keys = [f"k{i}" for i in range(24)]
        rows = []
        for label, script in (
            ("script that returns at once", "return 1"),
            ("script that reads the clock", "redis.call('TIME') return 1"),
        ):
            sha = r.script_load(script)
            rows.append(
                (f"{label} (24 keys)", *_measure(r, lambda sha=sha: r.evalsha(sha, 24, *keys, *["a"] * 10), a.calls))
            )
        for label, n in (("`start`, nothing to take", 0), ("`start` taking 1 task", 1), ("`start` taking 8 tasks", 8)):
            rows.append((label, *_measure(r, start(n), a.calls)))
        print(f"## What one call costs inside Redis (redis-server {r.info()['redis_version']}, {a.calls} calls each)\n")
        print("| call | µs inside Redis per call | Redis commands per call (the call included) |")
        print("|---|--:|--:|")
        for label, usec, per_call in rows:
            print(f"| {label} | {usec:.1f} | {per_call:.1f} |")
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
