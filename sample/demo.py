"""The demo's sample tasks (``make demo``): a first round that puts something on every page of the
dashboard, then a trickle that keeps it alive until the demo stops.

    python -m sample.demo --once      # the first round
    python -m sample.demo --trickle   # a few tasks every 2 s until stopped
"""

import itertools
import random
import signal
import sys
import time

import django

from queues import Batch, Queue


def first_round():
    Queue("default").enqueue_many([f"order-{i}" for i in range(1, 31)])
    Queue("emails").enqueue_many([f"user-{i}@example.com" for i in range(1, 13)])
    Queue("emails").enqueue("nobody@bounce.example")  # fails every attempt: retries, then Failures
    Queue("reports").enqueue_many(["acme:q1", "acme:q2", "globex:q1", "initech:q1", "acme:q3"])
    Queue("notifications").enqueue_many([f"push-{i}" for i in range(1, 21)])
    Queue("notifications").enqueue_many([f"reminder-{i}" for i in range(1, 6)], delay=60)  # delayed
    batch = Batch(on_complete=("default", "welcome-batch-done"), description="welcome mails")
    batch.enqueue_many("emails", [f"welcome-{i}@example.com" for i in range(1, 9)])
    batch.close()


def trickle():
    """A few tasks every 2 s; a report every 30 s, a delayed reminder every 20 s, a failing mail
    and a small batch every minute."""
    for n in itertools.count(1):
        time.sleep(2)
        Queue("default").enqueue(f"order-t{n}")
        Queue("notifications").enqueue(f"push-t{n}")
        if random.random() < 0.5:
            Queue("emails").enqueue(f"user-t{n}@example.com")
        if n % 15 == 0:
            Queue("reports").enqueue(f"{random.choice(['acme', 'globex', 'initech'])}:t{n}")
        if n % 10 == 0:
            Queue("notifications").enqueue(f"reminder-t{n}", delay=30)
        if n % 30 == 0:
            Queue("emails").enqueue(f"t{n}@bounce.example")
            batch = Batch(on_complete=("default", f"batch-t{n}-done"), description=f"mails t{n}")
            batch.enqueue_many("notifications", [f"batch-t{n}-{i}" for i in range(5)])
            batch.close()


def main(argv):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    django.setup()
    if "--trickle" not in argv:
        first_round()
        return
    try:
        trickle()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
