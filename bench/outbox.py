"""What the transactional outbox costs the fast path (issue 18): one transaction per task, each
writing one row of the application's (an AuditLog row: a transaction that enqueues on commit
commits something) and enqueueing one task, timed per task, for:

- ``before``: what ``on_commit=True`` did before the outbox (the engine's enqueue with the
  promised id, from ``transaction.on_commit``; nothing written to the database);
- ``outbox``: today's ``on_commit=True`` (a row inserted in the transaction, pushed after the
  commit, then deleted);
- ``row``: ``before`` plus the outbox's INSERT of the task's row in the transaction (what the
  outbox cannot do without: its row in the commit), but none of its Python, push or delete;
- ``plain``: the transaction, then an enqueue outside it (the floor).

Run with the project's interpreter:  .venv/bin/python bench/outbox.py [--n 2000] [--rounds 5]
    [--chunk 100] [--database sqlite|postgres]

Starts its own redis-server on a free port and uses a fresh SQLite file, with the project's
SQLite settings (WAL, IMMEDIATE transactions: ``worqr_site/settings.py``), or the local
PostgreSQL (``--database postgres`` creates a database ``worqr_bench_outbox``, trust auth). Each
round runs the modes in turn, ``--chunk`` tasks at a time, so that a machine whose load swings
slows every mode alike. Prints the median of the rounds' microseconds per task of each mode (wall
time, and CPU time of the whole process, the deleter thread included), and the median of the
rounds' ratios outbox / before, row / before (the row's own cost) and outbox / row (the rest).
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
    """Wall and CPU seconds (all of the process's threads: the deleter's too) of ``n`` tasks."""
    from django.db import transaction
    from queues import Queue, outbox
    from queues.engine import queue as engine_queue
    from queues.models import AuditLog, OutboxTask

    q = Queue("bench-outbox")
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        if mode == "outbox":
            with transaction.atomic():
                AuditLog.objects.create(action="bench")
                q.enqueue(str(i), on_commit=True)
        elif mode == "row":
            with transaction.atomic():
                AuditLog.objects.create(action="bench")
                ids = [engine_queue.new_task_id(q.name)]
                q.validate([str(i)])
                outbox.store(None, q.name, [outbox.Entry(ids[0], str(i).encode(), "", "", "", ())])
                transaction.on_commit(lambda i=i, ids=ids: engine_queue.Queue.enqueue_many(q, [str(i)], ids=ids))
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
    if mode == "outbox":
        # the deleter's work is off the request's path, not free: its delete of this chunk's
        # rows (one per chunk, as often as or more often than its own COALESCE) is timed here
        outbox.flush(60)
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    if mode == "row":
        OutboxTask.objects.all().delete()
    q.drop()
    return took, cpu


def one_round(modes, n, chunk):
    """``n`` tasks per mode, in chunks of ``chunk`` taken in turn (the order rotating), so that the
    load of other processes falls on every mode alike; microseconds per task (wall, CPU) per mode."""
    wall, cpu = dict.fromkeys(modes, 0.0), dict.fromkeys(modes, 0.0)
    for k in range(max(1, n // chunk)):
        for m in modes[k % len(modes) :] + modes[: k % len(modes)]:
            w, c = measure(m, chunk)
            wall[m] += w
            cpu[m] += c
    done = max(1, n // chunk) * chunk
    return {m: (wall[m] / done * 1e6, cpu[m] / done * 1e6) for m in modes}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    server = setup(args.database)
    try:
        modes = ("plain", "before", "row", "outbox")
        rounds = []
        measure("outbox", 200)  # warm up: connections, scripts loaded
        measure("before", 200)
        for _ in range(args.rounds):
            rounds.append(one_round(modes, args.n, args.chunk))
        for m in modes:
            wall = [r[m][0] for r in rounds]
            cpu = [r[m][1] for r in rounds]
            print(
                f"{m:7s} {statistics.median(wall):8.0f} us/task, CPU {statistics.median(cpu):6.0f} us/task"
                f"  (rounds: {', '.join(f'{x:.0f}' for x in wall)})"
            )
        for over, under in (("outbox", "before"), ("row", "before"), ("outbox", "row")):
            ratios = [r[over][0] / r[under][0] for r in rounds]
            cpu_ratio = statistics.median(r[over][1] / r[under][1] for r in rounds)
            print(
                f"{over} / {under}: {statistics.median(ratios):.2f}x wall (rounds: {', '.join(f'{x:.2f}' for x in ratios)}),"
                f" {cpu_ratio:.2f}x CPU"
            )
        print(f"({args.database}, n={args.n}, chunk={args.chunk}, {args.rounds} rounds)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
