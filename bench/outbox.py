"""What the transactional outbox costs the fast path (issue 18): one transaction per task, each
writing one row of the application's (an AuditLog row: a transaction that enqueues on commit
commits something) and enqueueing one task, timed per task, for:

- ``before``: what ``on_commit=True`` did before the outbox (the engine's enqueue with the
  promised id, from ``transaction.on_commit``; nothing written to the database);
- ``outbox``: today's ``on_commit=True`` (a row inserted in the transaction, pushed after the
  commit, then deleted);
- ``plain``: the transaction, then an enqueue outside it (the floor).

Run with the project's interpreter:  .venv/bin/python bench/outbox.py [--n 2000] [--rounds 5]
    [--database sqlite|postgres]

Starts its own redis-server on a free port and uses a fresh SQLite file (or the local
PostgreSQL: ``--database postgres`` creates a database ``worqr_bench_outbox``, trust auth). Prints the median
microseconds per task of each mode, and the outbox's ratio to ``before``.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup(database):
    from queues.testing import RedisServer

    server = RedisServer().start()
    os.environ["WORQR_REDIS_URL"] = server.url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "worqr_site.settings")
    if database == "sqlite":
        os.environ["WORQR_DB_PATH"] = os.path.join(tempfile.mkdtemp(prefix="worqr-bench-"), "db.sqlite3")
    import django
    from django.conf import settings

    if database == "postgres":
        import psycopg

        with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", autocommit=True) as c:
            c.execute("DROP DATABASE IF EXISTS worqr_bench_outbox")
            c.execute("CREATE DATABASE worqr_bench_outbox")
        settings.DATABASES["default"] = {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": "127.0.0.1",
            "USER": "postgres",
            "NAME": "worqr_bench_outbox",
        }
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return server


def measure(mode, n):
    from django.db import transaction
    from queues import Queue, outbox
    from queues.engine import queue as engine_queue
    from queues.models import AuditLog

    q = Queue("bench-outbox")
    start = time.perf_counter()
    for i in range(n):
        if mode == "outbox":
            with transaction.atomic():
                AuditLog.objects.create(action="bench")
                q.enqueue(str(i), on_commit=True)
        elif mode == "before":
            with transaction.atomic():
                AuditLog.objects.create(action="bench")
                ids = [engine_queue.new_task_id(q.name)]
                q.validate([str(i)])
                transaction.on_commit(lambda i=i, ids=ids: engine_queue.Queue.enqueue_many(q, [str(i)], ids=ids))
        else:
            with transaction.atomic():
                AuditLog.objects.create(action="bench")
            q.enqueue(str(i))
    took = time.perf_counter() - start
    outbox.flush(60)  # the deleter's work is off the request's path, not free: wait for it here
    q.drop()
    return took / n * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    server = setup(args.database)
    try:
        modes = ("plain", "before", "outbox")
        results = {m: [] for m in modes}
        measure("outbox", 200)  # warm up: connections, scripts loaded
        for _ in range(args.rounds):
            for m in modes:
                results[m].append(measure(m, args.n))
        for m in modes:
            print(
                f"{m:7s} {statistics.median(results[m]):8.0f} us/task  (rounds: {', '.join(f'{x:.0f}' for x in results[m])})"
            )
        ratio = statistics.median(results["outbox"]) / statistics.median(results["before"])
        print(f"outbox / before: {ratio:.2f}x  ({args.database}, n={args.n}, {args.rounds} rounds)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
