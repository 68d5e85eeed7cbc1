"""What process isolation costs per task, and what a fresh handler process costs.

    .venv/bin/python bench/isolation.py [N]

1. Round trip of N no-op tasks, one at a time, through the worker's thread pool and through its
   process pool (``isolation="process"``): the difference is isolation's cost per task (the
   pickling, two socket writes and two process wake-ups), which the drain figures hide in the
   Redis round trips.
2. Starting a handler process: a fork from the fork server (what a worker does after a timeout,
   a cancel, a crash or a recycle) against a new interpreter that sets Django up (what a spawn
   would cost).
No Redis is needed.
"""

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from queues.engine.registry import HandlerSpec  # noqa: E402
from queues.engine.task import Task  # noqa: E402
from queues.engine.worker.pool import ThreadPool  # noqa: E402
from queues.engine.worker.procpool import ProcessPool  # noqa: E402


def noop(task):
    return None


async def round_trips(n):
    loop = asyncio.get_running_loop()
    task = Task(id="bench-0123456789abcdef", queue="bench", payload="x" * 64, attempt=1, lease=1)
    threads = ThreadPool(1)
    procs = ProcessPool({"bench": HandlerSpec("bench", noop, False, isolation="process")}, 1, kill_grace=5)
    procs.start_server()  # a fork: fine here, before any thread of ours runs a job
    await procs.start()
    out = {}
    for label, submit in (
        ("thread", lambda: threads.submit(loop, noop, task)),
        ("process", lambda: procs.submit(task)),
    ):
        await submit()  # warm up (the process may still be starting)
        began = time.perf_counter()
        for _ in range(n):
            await submit()
        out[label] = (time.perf_counter() - began) / n * 1e6
    forks = []
    for _ in range(10):  # retire the idle process, time until a fresh one has run a task
        proc = procs.idle.popleft()
        proc.retiring = True
        proc.transport.close()
        began = time.perf_counter()
        await procs.submit(task)
        forks.append((time.perf_counter() - began) * 1000)
    threads.shutdown()
    procs.close()
    return out, statistics.median(forks)


def spawn_ms():
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="worqr_site.settings", WORQR_REDIS_URL="redis://127.0.0.1:1/0")
    times = []
    for _ in range(3):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=PROJECT, env=env, check=True)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    rt, fork = asyncio.run(round_trips(n))
    print(
        f"no-op round trip, {n} tasks one at a time: thread {rt['thread']:.0f} us, process {rt['process']:.0f} us: "
        f"isolation adds {rt['process'] - rt['thread']:.0f} us per task"
    )
    print(f"a fresh handler process, forked by the fork server, ready and running a task: {fork:.1f} ms (median of 10)")
    print(f"a new interpreter setting Django up instead: {spawn_ms():.0f} ms (median of 3)")


if __name__ == "__main__":
    main()
