"""worqr's scale and memory figures for `make bench` (issue 8), printed after the harness's table.

Run with the project's interpreter:  .venv/bin/python bench/scale.py [--quick]

Starts its own redis-server on a free port (an ephemeral one: never 6379 or the harness's 6391) and prints:

- start cost: the `start` script (a worker taking one task) with 10 vs 1,000,000 tasks pending,
  and with 10,000 tasks waiting on one held lock vs none. Each sample enqueues one task
  (untimed, so the count stays put), times `start`, then `finish`es the task. Redis's own time per
  call comes from SLOWLOG (threshold 0 us); the client's time adds the round trip.
- Redis memory per pending task with a 100-byte payload: INFO used_memory after - before
  enqueueing N = 100,000 into a flushed Redis, / N. The peers are filled the same way by the
  harness's producer.py in bench/.venv (bulk where the library has one), if that venv exists.
- worker resident memory when idle: VmRSS of an idle `manage.py worker` (and of the peers'
  single-process workers, summed over the worker's process group).
- the dashboard's queue page render time at 10 vs 1,000,000 pending, if the dashboard exists.
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
BENCH_PY = BENCH / ".venv" / "bin" / "python"
sys.path[:0] = [str(PROJECT)]

import redis  # noqa: E402

QUEUE = "bench"
PAYLOAD = "x" * 64
PEERS = [
    ("rq_adapter", "rq-simple"),
    ("huey_adapter", "huey"),
    ("dramatiq_adapter", "dramatiq"),
    ("celery_adapter", "celery-solo"),
    ("arq_adapter", "arq"),
]


def out(line=""):
    print(line, flush=True)


def note(line):
    print(f"[scale] {line}", file=sys.stderr, flush=True)


def start_redis(workdir):
    """A private redis-server on a free port, files in ``workdir`` (``queues.testing``):
    (the RedisServer, a client, its URL); ``server.stop()`` ends it."""
    from queues.testing import RedisServer

    server = RedisServer(directory=workdir).start()
    return server, redis.Redis(port=server.port), server.url


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def fill(queue, n, payload=PAYLOAD, chunk=50_000):
    for i in range(0, n, chunk):
        queue.enqueue_many([payload] * min(chunk, n - i))


def pct(xs, q):
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


# -- start cost --------------------------------------------------------------------------------


def start_cost(r, queue, samples):
    """Median / p99 of `start` (taking one task): Redis's time per call and the client's."""
    from queues.engine import commands, scripts
    from queues.engine.codes import Code

    sha = scripts.load_all()["start"].sha.encode()
    worker = "bench-probe"
    _register(r, worker)
    r.config_set("slowlog-max-len", samples * 100)  # Redis 7 also logs the commands inside scripts
    r.config_set("slowlog-log-slower-than", 0)
    r.slowlog_reset()
    client_us = []
    try:
        for _ in range(samples):
            queue.enqueue(PAYLOAD)
            t0 = time.perf_counter()
            reply = _start(r, worker, 35)
            client_us.append((time.perf_counter() - t0) * 1e6)
            (task,) = reply.tasks
            codes = commands.finish(QUEUE, worker, [(task.id, task.lease, "", False)], result_ttl=0).run(r)
            assert reply.status == Code.OK and codes == [Code.COMPLETED], (reply.status, codes)
        log = r.slowlog_get(samples * 100)
    finally:
        r.config_set("slowlog-log-slower-than", 10000)
        commands.unregister(QUEUE, worker).run(r)
    server_us = [e["duration"] for e in log if e["command"].split(b" ")[:2] == [b"EVALSHA", sha]]
    return {
        "server_p50": pct(server_us, 50),
        "server_p99": pct(server_us, 99),
        "client_p50": pct(client_us, 50),
        "client_p99": pct(client_us, 99),
        "n": len(server_us),
    }


def fmt_cost(c):
    return (
        f"{c['server_p50']:.0f} us in Redis (p99 {c['server_p99']:.0f}), {c['client_p50']:.0f} us "
        f"round trip (p99 {c['client_p99']:.0f})"
    )


def hold_lock_with_waiters(r, queue, waiters):
    """One task holds lock "L" (taken by another worker); `waiters` tasks wait on it (they went to
    the lock's wait list at enqueue). Call on an empty queue."""
    from queues.engine import readmodel

    queue.enqueue_many([PAYLOAD] * (waiters + 1), lock="L")
    _register(r, "bench-holder")
    assert len(_start(r, "bench-holder", 3600).tasks) == 1
    assert not _start(r, "bench-holder", 3600).tasks  # the others wait on the lock: none runnable
    waiting = readmodel.queue_counts(r, QUEUE)["waiting"]
    assert waiting == waiters, waiting
    return waiting


def _register(r, worker):
    from queues.engine import commands

    commands.register(QUEUE, worker, ttl=3600, lock_ttl=35, grace=10, default_timeout=0, fresh=False).run(r)


def _start(r, worker, lock_ttl):
    from queues.engine import commands

    return commands.start(QUEUE, worker, 1, lock_ttl=lock_ttl, grace=10, default_timeout=0, result_ttl=0).run(r)


# -- dashboard ---------------------------------------------------------------------------------


class Dashboard:
    """The queue page through Django's test Client, logged in as a superuser, or None."""

    def __init__(self):
        self.reason = None
        try:
            import queues.dashboard.urls  # noqa: F401
            from django.contrib.auth import get_user_model
            from django.core.management import call_command
            from django.test import Client
            from django.test.utils import setup_test_environment
            from django.urls import reverse

            self.url = reverse("queues:queue", args=[QUEUE])
            setup_test_environment()
            call_command("migrate", verbosity=0, interactive=False)
            user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-password")
            self.client = Client()
            self.client.force_login(user)
        except Exception as exc:  # the dashboard is being built elsewhere: report and go on
            self.reason = f"{type(exc).__name__}: {exc}"

    def render(self, times=5):
        def too_long(*_):
            raise TimeoutError("the queue page took over 120 s")

        old = signal.signal(signal.SIGALRM, too_long)
        signal.alarm(120)
        try:
            first = self.client.get(self.url)
            if first.status_code != 200:
                raise RuntimeError(f"GET {self.url} returned {first.status_code}")
            ms = []
            for _ in range(times):
                t0 = time.perf_counter()
                self.client.get(self.url)
                ms.append((time.perf_counter() - t0) * 1000)
            return statistics.median(ms)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)


# -- memory ------------------------------------------------------------------------------------


def used_memory(r):
    return r.info("memory")["used_memory"]


def without_latency_histograms(r):
    """Redis 7 keeps a latency histogram per command (about 25 KB), made the first time the
    command runs: a per-server constant that depends on which commands a library happens to use
    first, not memory per task. Turned off for the memory figures (older Redis has none)."""
    try:
        r.config_set("latency-tracking", "no")
    except redis.ResponseError:
        pass


def memory_per_task_worqr(r, url, n):
    from queues.engine import Connection, Queue

    r.flushall()
    before = used_memory(r)
    fill(Queue(QUEUE, Connection(url)), n, "x" * 100, chunk=5000)
    assert r.llen(f"worqr:{{{QUEUE}}}:pending") == n
    return (used_memory(r) - before) / n


def bench_env(url):
    return {**os.environ, "BENCH_REDIS_URL": url, "PYTHONPATH": str(BENCH)}


def memory_per_task_peer(r, url, module, n, timeout):
    """The peer's producer.py fill (bulk if the library has one) of n 100-byte jobs, no worker."""
    r.flushall()
    before = used_memory(r)
    modes = ["bulk", "plain"]
    for mode in modes:
        cp = subprocess.run(
            [str(BENCH_PY), "producer.py", module, mode, "--n", str(n), "--payload-bytes", "100"],
            cwd=BENCH,
            env=bench_env(url),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if cp.returncode == 0:
            break
        if "no attribute 'bulk'" not in cp.stderr:  # a library without a bulk path fails on Producer.bulk: use plain
            raise RuntimeError(cp.stderr.strip().splitlines()[-1] if cp.stderr.strip() else "failed")
        r.flushall()
    seconds = json.loads(cp.stdout.strip().splitlines()[-1])["seconds"]
    return (used_memory(r) - before) / n, mode, seconds


# -- worker RSS --------------------------------------------------------------------------------


def group_rss_kib(pgid):
    total, pids = 0, 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            status = (d / "status").read_text()
        except (OSError, IndexError, ValueError):
            continue
        rss = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
        if rss:
            total, pids = total + int(rss[0]), pids + 1
    return total, pids


def idle_rss(argv, env, ready, settle=2.0, timeout=30):
    """Start argv in its own group, wait until ready() and settle s more, sum VmRSS of the group."""
    p = subprocess.Popen(
        argv, cwd=BENCH, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not come up: {p.stderr.read().decode()[-300:]}")
            time.sleep(0.1)
        time.sleep(settle)
        return group_rss_kib(p.pid)
    finally:
        kill_group(p)


# -- main --------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big", type=int, default=1_000_000, help="pending tasks for the large case (1,000,000)")
    ap.add_argument("--waiters", type=int, default=10_000, help="tasks waiting on one held lock (10,000)")
    ap.add_argument("--mem-n", type=int, default=100_000, help="tasks for the memory figure (100,000)")
    ap.add_argument("--samples", type=int, default=2000, help="start calls timed per case (2000)")
    ap.add_argument("--peer-timeout", type=float, default=240, help="seconds per peer fill (240)")
    ap.add_argument("--no-peers", action="store_true", help="worqr only")
    ap.add_argument("--quick", action="store_true", help="small sizes, to try the script")
    a = ap.parse_args()
    if a.quick:
        a.big, a.waiters, a.mem_n, a.samples = 20_000, 1000, 5000, 300

    started = datetime.datetime.now().astimezone()
    results = {"started": started.isoformat(timespec="seconds"), "args": vars(a), "loadavg": os.getloadavg()}
    with tempfile.TemporaryDirectory() as workdir:
        server, r, url = start_redis(workdir)
        try:
            run(a, r, url, workdir, results)
        finally:
            server.stop()
            # what bench/goals.py reads (the memory and idle RSS goals)
            (BENCH / "results").mkdir(exist_ok=True)
            path = BENCH / "results" / f"scale-{started:%Y%m%dT%H%M%S}.json"
            path.write_text(json.dumps(results, indent=1))
            note(f"results: {path}")


def run(a, r, url, workdir, results):
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "bench.worqr_settings",
            "WORQR_REDIS_URL": url,
            "WORQR_BENCH_DB": str(Path(workdir) / "bench.sqlite3"),
            "BENCH_REDIS_URL": url,
        }
    )
    import warnings

    import django

    warnings.filterwarnings("ignore", message="No directory at", module="django.core.handlers.base")
    django.setup()
    from queues.engine import Connection, Queue

    queue = Queue(QUEUE, Connection(url))
    out(
        f"## worqr scale and memory (bench/scale.py; private redis-server {r.info('server')['redis_version']}, "
        f"load average {os.getloadavg()[0]:.1f} at start)"
    )
    out()

    # Memory per pending task, 100-byte payload.
    without_latency_histograms(r)
    note(f"memory: worqr, {a.mem_n:,} tasks")
    mem = {"worqr": (memory_per_task_worqr(r, url, a.mem_n), "bulk", None)}
    if not a.no_peers and BENCH_PY.exists():
        for module, label in PEERS:
            note(f"memory: {label}, {a.mem_n:,} jobs")
            try:
                mem[label] = memory_per_task_peer(r, url, module, a.mem_n, a.peer_timeout)
            except Exception as exc:
                mem[label] = f"{type(exc).__name__}: {exc}"[:200]
    elif not a.no_peers:
        mem["peers"] = "bench/.venv is missing (./bench/run.sh creates it)"
    r.flushall()
    results["memory_per_task"] = {k: v[0] for k, v in mem.items() if isinstance(v, tuple)}
    results["memory_payload_bytes"], results["memory_n"] = 100, a.mem_n
    best_peer = min((v[0] for k, v in mem.items() if k != "worqr" and isinstance(v, tuple)), default=None)
    out(f"- Redis memory per pending task (100-byte payload; INFO used_memory delta / {a.mem_n:,}):")
    for label, v in mem.items():
        if isinstance(v, tuple):
            ratio = f" ({v[0] / best_peer:.2f}x the smallest peer)" if label == "worqr" and best_peer else ""
            out(f"  - {label}: {v[0]:,.0f} bytes{ratio}")
        else:
            out(f"  - {label}: not measured ({v})")

    # Idle worker RSS.
    note("idle worker RSS")
    # (with the outbox relay on, as a deployed worker has it)
    wenv = {**os.environ, "PYTHONPATH": str(BENCH), "WORQR_BENCH_ASYNC": "0", "WORQR_BENCH_RELAY": "1"}
    wenv.pop("WORQR_BENCH_DB", None)
    worker_argv = [
        sys.executable,
        str(PROJECT / "manage.py"),
        "worker",
        QUEUE,
        "--concurrency",
        "8",
        "--log-level",
        "WARNING",
    ]
    try:
        kib, pids = idle_rss(worker_argv, wenv, lambda: r.scard("worqr:workers") > 0)
        results["idle_rss_mib"] = kib / 1024
        out(
            f"- Idle worker resident memory: worqr `manage.py worker --concurrency 8`: {kib / 1024:.1f} MiB "
            f"(VmRSS, {pids} process)"
        )
    except Exception as exc:
        out(f"- Idle worker resident memory: worqr: not measured ({exc})")
    r.flushall()
    if not a.no_peers and BENCH_PY.exists():
        peers_rss = []
        for module, label in PEERS:
            try:
                cp = subprocess.run(
                    [
                        str(BENCH_PY),
                        "-c",
                        f"import json; from adapters import {module} as m; "
                        f"print(json.dumps(m.worker_cmds({label!r}, 1)))",
                    ],
                    cwd=BENCH,
                    env=bench_env(url),
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                argv = json.loads(cp.stdout)[0]
                kib, pids = idle_rss(argv, bench_env(url), lambda: True, settle=4.0)
                peers_rss.append(f"{label} {kib / 1024:.1f} MiB ({pids} proc{'s' if pids > 1 else ''})")
            except Exception as exc:
                peers_rss.append(f"{label} not measured ({type(exc).__name__})")
            r.flushall()
        out(f"  - peers, one worker each, 4 s after start, VmRSS summed over its process group: {'; '.join(peers_rss)}")

    # Start cost and the queue page: 10 pending, then the big queue.
    dash = Dashboard()
    r.flushall()
    fill(queue, 10)
    note(f"start cost: 10 pending, {a.samples} samples")
    small = start_cost(r, queue, a.samples)
    page_small = dash.render() if dash.reason is None else None
    note(f"start cost: filling {a.big:,} pending")
    fill(queue, a.big - 10)
    note(f"start cost: {r.llen(f'worqr:{{{QUEUE}}}:pending'):,} pending")
    big = start_cost(r, queue, a.samples)
    page_big = None
    if dash.reason is None:
        try:
            page_big = dash.render()
        except Exception as exc:
            dash.reason = f"{type(exc).__name__}: {exc}"
    r.flushall()
    note(f"start cost: {a.waiters:,} tasks waiting on a held lock")
    hold_lock_with_waiters(r, queue, a.waiters)
    fill(queue, 10)
    locked = start_cost(r, queue, a.samples)
    r.flushall()

    out(f"- Start cost (`start` script taking 1 task, median of {small['n']} calls per case):")
    out(f"  - 10 pending: {fmt_cost(small)}")
    out(f"  - {a.big:,} pending: {fmt_cost(big)} (ratio to 10 pending: {big['server_p50'] / small['server_p50']:.2f})")
    out(
        f"  - 10 pending + {a.waiters:,} tasks waiting on one held lock: {fmt_cost(locked)} "
        f"(ratio to none: {locked['server_p50'] / small['server_p50']:.2f})"
    )
    if dash.reason is None and page_small is not None and page_big is not None:
        out(
            f"- Queue page render (dashboard `queues:queue`, Django test Client, median of 5): 10 pending "
            f"{page_small:.1f} ms, {a.big:,} pending {page_big:.1f} ms (ratio {page_big / page_small:.2f})"
        )
    else:
        out(f"- Queue page render at 10 vs {a.big:,} pending: dashboard not available ({dash.reason})")


if __name__ == "__main__":
    main()
