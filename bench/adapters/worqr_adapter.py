"""worqr (this project): Lua scripts on Redis; an idle worker waits on its pub/sub control channel.

Workers are the project's own `manage.py worker`, run with the project's virtualenv (redis-py 8,
hiredis) and bench/worqr_settings.py, which installs bench/worqr_tasks.py (the no-op handler).
The producer imports the project's engine (`queues.engine`, which imports no Django) into the
harness's producer process, so the timed calls are worqr's own `Queue.enqueue` and
`Queue.enqueue_many`, on this venv's redis-py 5.3.1 + hiredis like every other producer here
(measured by hand: the same enqueue rates as with the project's redis-py 8.1).
"""
import os
import subprocess
import sys
from pathlib import Path

import common

BENCH = Path(__file__).resolve().parent.parent
PROJECT = BENCH.parent
PROJECT_PY = PROJECT / ".venv" / "bin" / "python"
if str(PROJECT) not in sys.path:
    sys.path.append(str(PROJECT))  # after the bench folder, so `bench.py` never shadows anything

from queues.engine import Connection, Queue  # noqa: E402

# Slots per worker process (`manage.py worker --concurrency`); one asyncio loop per process. The
# fastest of 8, 16, 32, 64 and 128 on this 2-core machine (sync handler, 2 processes: 4,223,
# 6,326, 6,940 and 8,800 tasks/s; at 128 the bench handler's own Redis client, a redis-py pool of
# at most 100 connections, ran out of them), as each peer runs at its fastest thread count.
CONCURRENCY = int(os.environ.get("WORQR_BENCH_CONCURRENCY", "64"))
VERSION = subprocess.run(["git", "-C", str(PROJECT), "describe", "--always", "--dirty"],
                         capture_output=True, text=True).stdout.strip() or "unknown"
DIST = "worqr"
VARIANTS = {
    "worqr": f"manage.py worker --concurrency {CONCURRENCY}, sync handler (a pool thread per slot); "
             "N procs = N workers",
    "worqr-async": f"manage.py worker --concurrency {CONCURRENCY}, `async def` handler on the worker's loop; "
                   "N procs = N workers",
    "worqr-processes": f"manage.py worker --processes N --concurrency {CONCURRENCY}, sync handler: one command, "
                       "a supervisor and N workers",
    "worqr-isolated": f"manage.py worker --isolation process --concurrency {CONCURRENCY}, sync handler in "
                      f"{CONCURRENCY} pre-forked handler processes per worker; N procs = N workers",
}
#: Row labels in the printed table (issue 17's names); ``--only`` and the results files keep the ids.
LABELS = {"worqr-processes": "worqr --processes 2", "worqr-isolated": "worqr isolation=process",
          "worqr-chunk": "worqr chunk=100", "worqr-chunk-async": "worqr-async chunk=100"}
#: Not in VARIANTS: rows that sidekiq_terms.py and future.py add only when worqr's @handler takes
#: chunk= (they detect it): the worqr and worqr-async rows with a handler of up to CHUNK tasks per call.
CHUNK_VARIANTS = ("worqr-chunk", "worqr-chunk-async")
CHUNK = 100
BULK = "Queue.enqueue_many (one Lua call per 500 tasks)"
QUEUE = "bench"


class Producer:
    def __init__(self):
        self.queue = Queue(QUEUE, Connection(common.REDIS_URL))

    def plain(self, n, payload):
        for _ in range(n):
            self.queue.enqueue(payload)

    def bulk(self, n, payload):
        self.queue.enqueue_many([payload] * n)

    def one(self, payload, ts):
        self.queue.enqueue(f"{ts!r}|{payload}")  # bench/worqr_tasks.py splits ts off again


def worker_cmds(variant, procs):
    env = ["env", "DJANGO_SETTINGS_MODULE=bench.worqr_settings", f"WORQR_REDIS_URL={common.REDIS_URL}",
           f"WORQR_BENCH_ASYNC={1 if variant in ('worqr-async', 'worqr-chunk-async') else 0}",
           f"WORQR_BENCH_CHUNK={CHUNK if variant in CHUNK_VARIANTS else 0}"]
    cmd = [str(PROJECT_PY), str(PROJECT / "manage.py"), "worker", QUEUE, "--log-level", "WARNING"]
    if variant == "worqr-processes":
        return [env + cmd + ["--concurrency", str(CONCURRENCY), "--processes", str(procs)]]
    if variant == "worqr-isolated":
        cmd += ["--isolation", "process"]
    return [env + cmd + ["--concurrency", str(CONCURRENCY)]] * procs
