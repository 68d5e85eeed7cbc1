"""What a drain costs per task: CPU time of the Redis main thread and of the worker process, and the
Redis commands run (the scripts' own included), while one worker (``--concurrency``, 64 as in the bench, with the bench's
no-op handler) drains N queued tasks. CPU time, unlike a rate, hardly moves with the rest of the
machine's load, so two checkouts can be compared on a busy machine
(``WORQR_CHECKOUT=/path/to/other/checkout``, with its own ``.venv``; this checkout's by default).

    .venv/bin/python bench/drain_cost.py [--n 30000] [--concurrency 64] [--variants sync,async,chunk,chunk-async] [--by-command]

Each variant runs on a private ``redis-server`` of its own (port ``--port`` and up).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

CHECKOUT = Path(os.environ.get("WORQR_CHECKOUT") or Path(__file__).resolve().parent.parent)
VARIANTS = ("sync", "async", "chunk", "chunk-async")


def _redis_cpu(r):
    info = r.info("cpu")
    return info["used_cpu_user_main_thread"] + info["used_cpu_sys_main_thread"]


def _proc_cpu(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait(check, timeout, what):
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise SystemExit(f"drain_cost: {what} within {timeout} s")
        time.sleep(0.01)


def measure(variant, n, port, concurrency=64):
    workdir = tempfile.mkdtemp()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    r = redis.Redis.from_url(url)
    worker = None
    try:
        _wait(lambda: _ping(r), 10, "no redis-server")
        env = {
            **os.environ,
            "PYTHONPATH": f"{CHECKOUT}:{CHECKOUT / 'bench'}",
            "DJANGO_SETTINGS_MODULE": "bench.worqr_settings",
            "WORQR_REDIS_URL": url,
            "BENCH_REDIS_URL": url,
            "WORQR_BENCH_ASYNC": "1" if "async" in variant else "0",
            "WORQR_BENCH_CHUNK": "100" if "chunk" in variant else "0",
        }
        python = str(CHECKOUT / ".venv" / "bin" / "python")
        fill = "from queues.engine import Queue\nimport django, sys\ndjango.setup()\nn = int(sys.argv[1])\n"
        fill += "for i in range(0, n, 5000): Queue('bench').enqueue_many(['x' * 64] * min(5000, n - i))\n"
        subprocess.run([python, "-c", fill, str(n)], env=env, cwd=CHECKOUT, check=True)
        r.config_resetstat()
        redis_before = _redis_cpu(r)
        worker = subprocess.Popen(
            [python, "manage.py", "worker", "bench", "--log-level", "WARNING", "--concurrency", str(concurrency)],
            env=env,
            cwd=CHECKOUT,
        )
        # the worker's CPU is counted from its first task on (Django's start-up left out)
        _wait(lambda: int(r.get("bench:done") or 0) > 0, 120, "no task done")
        began, worker_before, done_before = time.monotonic(), _proc_cpu(worker.pid), int(r.get("bench:done"))
        _wait(lambda: int(r.get("bench:done") or 0) >= n, 600, f"{n} tasks not done")
        took, worker_cpu = time.monotonic() - began, _proc_cpu(worker.pid) - worker_before
        redis_cpu = _redis_cpu(r) - redis_before
        stats = r.info("commandstats")
        calls = sum(v["calls"] for v in stats.values())
        scripts = sum(v["calls"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))
        by_command = sorted(((v["calls"] / n, k[8:]) for k, v in stats.items()), reverse=True)
        timed = n - done_before
        return {
            "rate": timed / took,
            "redis_us": 1e6 * redis_cpu / n,
            "worker_us": 1e6 * worker_cpu / timed,
            "commands": calls / n,
            "scripts": scripts / n,
            "by_command": by_command,
        }
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait()
        server.terminate()
        server.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def _ping(r):
    try:
        return r.ping()
    except redis.ConnectionError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=30_000, help="tasks per drain (30,000)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="of " + ", ".join(VARIANTS))
    ap.add_argument("--port", type=int, default=6440, help="the first variant's private Redis port (6440)")
    ap.add_argument("--concurrency", type=int, default=64, help="the worker's slots (64, as in the bench)")
    ap.add_argument("--by-command", action="store_true", help="also list the commands run per task")
    a = ap.parse_args()
    variants = a.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or a.n < 1000:
        ap.error(f"unknown variants {unknown}" if unknown else "--n must be 1000 or more")
    print(f"checkout {CHECKOUT}, {a.n:,} tasks per drain, load average {os.getloadavg()[0]:.1f}")
    print("| handler | Redis CPU µs/task | worker CPU µs/task | Redis commands/task | script calls/task | rate/s |")
    print("|---|--:|--:|--:|--:|--:|")
    for i, variant in enumerate(variants):
        m = measure(variant, a.n, a.port + i, a.concurrency)
        print(
            f"| {variant} | {m['redis_us']:.1f} | {m['worker_us']:.1f} | {m['commands']:.1f} | "
            f"{m['scripts']:.3f} | {m['rate']:,.0f} |",
            flush=True,
        )
        if a.by_command:
            print("  " + ", ".join(f"{k} {c:.2f}" for c, k in m["by_command"][:12] if c >= 0.01))
    return 0


if __name__ == "__main__":
    sys.exit(main())
