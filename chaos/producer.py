"""A chaos soak producer (``manage.py chaos --produce``): commits batches of tasks until the
ledger holds ``target`` ids. Each batch is one transaction that takes the ledger's turn (so
no two producers count the same remainder), then enqueues with
``on_commit=True`` (the outbox) and writes the ids to the ledger. On SIGUSR1 the next batch
registers ``os._exit`` on commit *before* its enqueue: the process dies between the commit and
the push (after writing the batch's ids to ``$WORQR_CHAOS_DIR/stranded-<pid>.ids``)."""

import os
import random
import signal
import time

from django.db import OperationalError, connections, transaction

from queues import Queue

from . import LEDGER, LEDGER_TURN, QUEUE

#: Exit status of a producer that died between a commit and its push, as asked.
DIED_AFTER_COMMIT = 3

_die = False


def _ask_to_die(signum, frame):
    global _die
    _die = True


def ledger_count(using):
    with connections[using].cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {LEDGER}")
        return cur.fetchone()[0]


def produce(target, batch, sleep_ms, using="default", rate=None):
    """Commit batches until the ledger has ``target`` ids, at ``rate`` tasks/s at most; returns 0."""
    signal.signal(signal.SIGUSR1, _ask_to_die)
    queue = Queue(QUEUE)
    rng = random.Random()
    started, made = time.monotonic(), 0
    while True:
        if rate:
            time.sleep(max(0.0, started + made / rate - time.monotonic()))
        try:
            with transaction.atomic(using=using):
                with connections[using].cursor() as cur:
                    # The turn first: until this transaction ends, no other producer counts.
                    cur.execute(f"UPDATE {LEDGER_TURN} SET n = n + 1")
                left = target - ledger_count(using)
                if left <= 0:
                    return 0
                n = min(batch, left)
                if _die:
                    transaction.on_commit(lambda: os._exit(DIED_AFTER_COMMIT), using=using)
                ids = queue.enqueue_many([str(rng.randint(0, sleep_ms)) for _ in range(n)], on_commit=True, using=using)
                with connections[using].cursor() as cur:
                    cur.executemany(f"INSERT INTO {LEDGER} (task_id) VALUES (%s)", [(i,) for i in ids])
                if _die:
                    path = os.path.join(os.environ["WORQR_CHAOS_DIR"], f"stranded-{os.getpid()}.ids")
                    with open(path, "w") as f:
                        f.write("\n".join(ids))
            made += n
        except OperationalError:  # SQLite busy: another process writes; try the batch again
            time.sleep(0.05)
