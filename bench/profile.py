"""Where worqr's time goes: py-spy flame graphs and instrumented counts (`make profile`).

Run with the project's interpreter against a Redis given by --url (``make profile`` starts a
private one on a free port):

  profile.py produce --n N          enqueue N tasks one by one (``Queue.enqueue``): the producer
  profile.py drain --n N [--async]  fill N tasks in bulk, then one in-process worker
                                    (``--concurrency 8``) drains them with a no-op handler
  profile.py counts --n N           instrumented runs, printed as JSON: Redis round trips per
                                    enqueue and per task run, event-loop iterations per task run,
                                    and Redis's own time per call of each script (INFO commandstats)

``produce`` and ``drain`` are what ``make profile`` records with ``py-spy record`` into
``bench/results/profile-*.svg``. A round trip is one write of a command (or of a whole pipeline)
on a connection: ``send_packed_command`` on redis-py's sync and asyncio connections; pub/sub
messages a worker receives are not counted (nothing is asked for them).
"""

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

import redis  # noqa: E402
import redis.asyncio.connection  # noqa: E402
import redis.connection  # noqa: E402
from queues.engine import Config, Connection, Queue, handler  # noqa: E402
from queues.engine.worker.launcher import Worker  # noqa: E402

QUEUE = "profile"
DONE = "profile:done"
PAYLOAD = "x" * 64


class Counts:
    """Round trips (sync and asyncio connections) and event-loop iterations, counted by patching."""

    def __init__(self):
        self.sync = self.aio = self.loop_iterations = 0
        self._lock = threading.Lock()
        sync_send = redis.connection.AbstractConnection.send_packed_command
        aio_send = redis.asyncio.connection.AbstractConnection.send_packed_command
        counts = self

        def counted_sync(conn, *args, **kwargs):
            with counts._lock:
                counts.sync += 1
            return sync_send(conn, *args, **kwargs)

        async def counted_aio(conn, *args, **kwargs):
            counts.aio += 1
            return await aio_send(conn, *args, **kwargs)

        redis.connection.AbstractConnection.send_packed_command = counted_sync
        redis.asyncio.connection.AbstractConnection.send_packed_command = counted_aio
        loop_cls = asyncio.get_event_loop_policy()._loop_factory
        run_once = loop_cls._run_once

        def counted_run_once(loop):
            counts.loop_iterations += 1
            return run_once(loop)

        loop_cls._run_once = counted_run_once

    def snapshot(self):
        return self.sync, self.aio, self.loop_iterations


def connection(url):
    return Connection(url, Config(redis_url=url, opentelemetry=False))


def register(is_async, url):
    """The no-op handler: one INCR of DONE per task, like the harness's jobs."""
    if is_async:
        import redis.asyncio as aredis

        clients = {}

        @handler(QUEUE)
        async def noop(task):
            loop = asyncio.get_running_loop()
            if loop not in clients:
                clients[loop] = aredis.Redis.from_url(url)
            await clients[loop].incr(DONE)

    else:
        client = redis.Redis.from_url(url)

        @handler(QUEUE)
        def noop(task):
            client.incr(DONE)


def produce(url, n):
    queue = Queue(QUEUE, connection(url))
    queue.client.delete(DONE)
    t = time.perf_counter()
    for _ in range(n):
        queue.enqueue(PAYLOAD)
    return n / (time.perf_counter() - t)


def drain(url, n, is_async, counts=None, concurrency=8):
    """Fill n tasks, run a worker until all are done; returns (tasks/s, round trips, iterations)."""
    conn = connection(url)
    queue = Queue(QUEUE, conn)
    queue.drop()
    conn.client.delete(DONE)
    queue.enqueue_many([PAYLOAD] * n)
    register(is_async, url)
    worker = Worker([QUEUE], conn, concurrency=concurrency, grace=5.0)
    result = {}

    def watch():
        while int(conn.client.get(DONE) or 0) < 1:
            time.sleep(0.001)
        t, cpu, before = time.perf_counter(), time.process_time(), counts.snapshot() if counts else None
        redis_before = redis_usec(conn.client)
        while int(conn.client.get(DONE) or 0) < n:
            time.sleep(0.002)
        result["rate"] = (n - 1) / (time.perf_counter() - t)
        result["cpu_us"] = (time.process_time() - cpu) / (n - 1) * 1e6
        result["redis_us"] = (redis_usec(conn.client) - redis_before) / (n - 1)
        if counts:
            after = counts.snapshot()
            result["deltas"] = [a - b for a, b in zip(after, before)]
        worker.loop.call_soon_threadsafe(worker.request_stop)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    worker.run()
    watcher.join()
    return result


def redis_usec(client):
    """Redis's own time in scripts so far (µs), from INFO commandstats."""
    return client.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0)


def command_usec(client):
    stats = client.info("commandstats")
    return {k[8:]: v["usec_per_call"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval")}


def counts_run(url, n):
    counts = Counts()
    out = {}
    client = redis.Redis.from_url(url)
    client.config_resetstat()
    before, cpu = counts.snapshot(), time.process_time()
    rate = produce(url, n)
    after, cpu = counts.snapshot(), time.process_time() - cpu
    out["enqueue"] = {
        "rate_per_s": round(rate),
        "producer_cpu_us_per_enqueue": round(cpu / n * 1e6, 1),
        "round_trips_per_enqueue": round((after[0] - before[0]) / n, 3),
        "redis_usec_per_evalsha": command_usec(client).get("evalsha"),
    }
    for label, is_async in (("drain_sync", False), ("drain_async", True)):
        # Run each drain in a child process so that the handler registry starts empty.
        pid = os.fork()
        if pid == 0:
            client.config_resetstat()
            res = drain(url, n, is_async, counts)
            sync, aio, iters = res["deltas"]
            per = n - 1
            info = {
                "rate_per_s": round(res["rate"]),
                "worker_cpu_us_per_task": round(res["cpu_us"], 1),
                "redis_script_us_per_task": round(res["redis_us"], 1),
                "round_trips_per_task": round((sync + aio) / per, 3),
                "of_which_handler_incr": 1.0,
                "event_loop_iterations_per_task": round(iters / per, 3),
            }
            Path(f"/tmp/worqr-profile-{os.getppid()}-{label}.json").write_text(json.dumps(info))
            os._exit(0)
        os.waitpid(pid, 0)
        path = Path(f"/tmp/worqr-profile-{os.getpid()}-{label}.json")
        out[label] = json.loads(path.read_text())
        path.unlink()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=("produce", "drain", "counts"))
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--async", dest="is_async", action="store_true", help="drain with an async def handler")
    ap.add_argument("--url", default=os.environ.get("WORQR_REDIS_URL", "redis://127.0.0.1:6379/0"))
    a = ap.parse_args()
    if a.part == "produce":
        print(json.dumps({"enqueue_per_s": round(produce(a.url, a.n))}))
    elif a.part == "drain":
        print(json.dumps({"drain_per_s": round(drain(a.url, a.n, a.is_async)["rate"])}))
    else:
        print(json.dumps(counts_run(a.url, a.n), indent=2))


if __name__ == "__main__":
    main()
