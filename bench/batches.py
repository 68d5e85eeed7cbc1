"""A 100,000-task batch (issue 15): enqueued in bulk, tracked to its end with O(1) work per
finished task, its callback enqueued once.

Run with the project's interpreter:  .venv/bin/python bench/batches.py [--tasks 100000]

Starts its own redis-server on a free port. Opens a batch with an on_complete callback,
``enqueue_many``s the tasks into one queue (timed: the goal is >= 50,000 tasks/s), closes it,
then plays the worker's part through the engine's calls: ``start`` takes 500 tasks at a time
and acknowledges the previous 500 (the scripts record each end in O(1)), and
``workflows.drain`` tells the batch (one ``batch_tell`` per 500 ended tasks: a counter bump per
task, never a scan of the batch). Prints enqueue and tracking rates, checks the counts and
that the callback was enqueued exactly once.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
sys.path[:0] = [str(PROJECT), str(BENCH)]

from scale import start_redis  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="worqr-bench-batches-")
    server, r, url = start_redis(workdir)
    try:
        from queues.engine import Batch, Config, Queue, commands, configure, workflows

        conn = configure(Config(), url)
        client = conn.client
        batch = Batch(on_complete=("bench-callback", "done"), description="bench")
        payloads = [f"row-{i}" for i in range(args.tasks)]
        began = time.perf_counter()
        batch.enqueue_many("bench-batch", payloads)
        enqueue_s = time.perf_counter() - began
        batch.close()
        assert Batch.get(batch.id)["total"] == args.tasks

        commands.register("bench-batch", "w", ttl=3600, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
        began, drain_s, acks = time.perf_counter(), 0.0, []
        while True:
            started = commands.start(
                "bench-batch", "w", 500, lock_ttl=60, grace=1, default_timeout=0, result_ttl=0, acks=acks
            ).run(client)
            d0 = time.perf_counter()
            workflows.drain_all(client, "bench-batch")
            drain_s += time.perf_counter() - d0
            acks = [(t.id, t.lease, "", False) for t in started.tasks]
            if not acks:
                break
        track_s = time.perf_counter() - began
        info = Batch.get(batch.id)
        callbacks = Queue("bench-callback", conn).counts()["enqueued"]
        print(f"batch of {args.tasks} tasks")
        print(f"  enqueue_many:        {enqueue_s:.2f} s = {args.tasks / enqueue_s:,.0f} tasks/s (goal >= 50,000)")
        print(f"  run and track:       {track_s:.2f} s = {args.tasks / track_s:,.0f} tasks/s (take + finish + drain)")
        print(f"  of which draining:   {drain_s:.2f} s = {drain_s / args.tasks * 1e6:.1f} us per finished task")
        print(f"  state={info['state']} completed={info['completed']} failed={info['failed']} callbacks={callbacks}")
        ok = info["state"] == "succeeded" and info["completed"] == args.tasks and callbacks == 1
        print("  OK: counts exact, callback enqueued once" if ok else "  FAILED")
        return 0 if ok else 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
