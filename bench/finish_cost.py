"""What the ``finish`` and ``fail`` scripts cost Redis per task, one task per call (µs of the
Redis main thread's CPU time per call, ``INFO cpu``: the script and the call's own I/O; less
disturbed by a loaded machine than the wall time of ``INFO commandstats``, shown beside it): the common path of a worker that reports
each outcome as it comes; ``finish, named handler`` and ``fail, named handler`` send a Tasks
framework function's name with it, which the scripts chart apart too (docs/dashboard.md, Charts).
Compare two checkouts by running it with each one's code
(``WORQR_CHECKOUT=/path/to/other/checkout``; this checkout's by default).

Run against a Redis of your own (it writes queues ``fc-*`` and drops them)::

    .venv/bin/python bench/finish_cost.py --url redis://127.0.0.1:6399/0 [--n 5000] [--rounds 3]
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

import redis

# the checkout's code: this one's, or another's (``WORQR_CHECKOUT=/path``) to compare them
sys.path[:0] = [os.environ.get("WORQR_CHECKOUT") or str(Path(__file__).resolve().parent.parent)]
from queues.engine import Queue, commands  # noqa: E402
from queues.engine.connection import Connection  # noqa: E402

LOCK_TTL, GRACE = 35.0, 1.0


def _usec(client):
    """(the main thread's CPU time, the time spent in EVALSHA and EVAL (µs), the commands the
    scripts ran) so far."""
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    inner = sum(
        v.get("calls", 0) for k, v in stats.items() if k not in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_info")
    )
    main = cpu.get("used_cpu_user_main_thread", cpu["used_cpu_user"]) + cpu.get(
        "used_cpu_sys_main_thread", cpu["used_cpu_sys"]
    )
    return main * 1e6, sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in ("evalsha", "eval")), inner


def one_round(client, conn, name, n, failing, handler=""):
    q = Queue(name, connection=conn)
    for start in range(0, n, 500):
        q.enqueue_many(["x"] * min(500, n - start))
    commands.register(name, "w", ttl=60, lock_ttl=LOCK_TTL, grace=GRACE, default_timeout=0, fresh=False).run(client)
    tasks = []
    while len(tasks) < n:
        got = commands.start(name, "w", 100, lock_ttl=LOCK_TTL, grace=GRACE, default_timeout=0, result_ttl=0).run(
            client
        )
        tasks.extend(got.tasks)
    cpu0, wall0, calls0 = _usec(client)
    for t in tasks:
        if failing:
            named = {"handler": handler} if handler else {}
            commands.fail(
                name,
                "w",
                t.id,
                t.lease,
                "E",
                "tb",
                retries=0,
                backoff=1,
                backoff_max=10,
                jitter=0,
                history=100,
                **named,
            ).run(client)
        else:
            ack = (t.id, t.lease, "", False, "", handler) if handler else (t.id, t.lease, "", False)
            commands.finish(name, "w", [ack], result_ttl=0).run(client)
    cpu1, wall1, calls1 = _usec(client)
    q.drop()
    return (cpu1 - cpu0) / n, (wall1 - wall0) / n, (calls1 - calls0) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    client = redis.Redis.from_url(args.url)
    conn = Connection(args.url)
    rows = [(False, "finish", ""), (True, "fail", "")]
    if not os.environ.get("WORQR_CHECKOUT"):  # a checkout without charts per handler can't send a name
        rows += [(False, "finish, named handler", "app.tasks.send"), (True, "fail, named handler", "app.tasks.send")]
    for failing, label, handler in rows:
        costs = [
            one_round(client, conn, f"fc-{label.split(',')[0]}-{r}", args.n, failing, handler)
            for r in range(args.rounds)
        ]
        cpu, wall, calls = (statistics.median(c[i] for c in costs) for i in range(3))
        print(
            f"{label}: {cpu:.1f} µs of Redis CPU per task ({wall:.1f} µs in the script by commandstats;"
            f" {calls:.2f} commands run by the script), median of {args.rounds} rounds of {args.n}"
        )


if __name__ == "__main__":
    main()
