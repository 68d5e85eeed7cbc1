"""The figures of features still to come, measured once they exist; until then one line each says so.

    .venv/bin/python bench/future.py [--n 5000] [--drain-n 100000] [--quick]

Run with the project's interpreter; its own redis-server on a free port. Each feature is detected
by trying it (never by a version number):

- task controls (throttle, debounce, encrypted payloads): enqueue one by one with
  ``throttle=(key, 60)``, with ``debounce=(key, 60)`` (a fresh key per task, so each call writes
  a task: the worst case) and plain, in interleaved rounds; then 1 KB payloads into a queue listed
  in ``WORQR["ENCRYPTED_QUEUES"]`` against a plain queue (in a child process whose settings carry
  ``ENCRYPTION_KEYS``). A keyword the enqueue refuses, settings the project refuses, or a payload
  found in plaintext in Redis (every key of the queue DUMPed uncompressed) means "not available".
- chunk handlers: a drain of ``--drain-n`` no-op tasks by one worker with ``chunk=100`` against
  one task per call, sync and async (the harness's drain, rows worqr / worqr-chunk and
  worqr-async / worqr-chunk-async), when ``@handler`` takes ``chunk=``.

Prints one table; results/future-<time>.json for bench/goals.py.
"""

import argparse
import base64
import datetime
import importlib.util
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
sys.path[:0] = [str(PROJECT), str(BENCH)]

import redis  # noqa: E402

from scale import start_redis  # noqa: E402

ENCRYPTED_QUEUE, PLAIN_QUEUE = "bench-encrypted", "bench-plain"
CONTROLS = ("throttle", "debounce")


def setup_django(url, encryption=False):
    os.environ.update({"DJANGO_SETTINGS_MODULE": "bench.worqr_settings", "WORQR_REDIS_URL": url})
    if encryption:  # read by bench/worqr_settings.py
        os.environ["WORQR_BENCH_ENCRYPTED_QUEUES"] = ENCRYPTED_QUEUE
        os.environ["WORQR_BENCH_ENCRYPTION_KEY"] = base64.urlsafe_b64encode(os.urandom(32)).decode()
    import django

    django.setup()


def enqueue_rate(queue, n, payload, **option_for):
    """Tasks/s of n one-by-one enqueues; ``option_for`` maps an option to a function of i."""
    t0 = time.perf_counter()
    for i in range(n):
        queue.enqueue(payload, **{k: f(i) for k, f in option_for.items()})
    return n / (time.perf_counter() - t0)


def controls(n, rounds):
    """{control: {"ratio": median rate / plain's, ...} or {"why": ...}}."""
    from queues import Queue

    queue, out = Queue("bench-controls"), {}
    available = []
    for control in CONTROLS:
        try:
            queue.enqueue("probe", **{control: ("probe", 60)})
            available.append(control)
        except TypeError as exc:  # an unknown keyword
            out[control] = {"why": f"Queue.enqueue refuses {control}= ({exc})"}
    if not available:
        return out
    rates = {k: [] for k in ["plain", *available]}
    for r in range(rounds):
        rates["plain"].append(enqueue_rate(queue, n, "x" * 64))
        for control in available:
            rates[control].append(enqueue_rate(queue, n, "x" * 64, **{control: lambda i, r=r: (f"k{r}-{i}", 60)}))
    plain = statistics.median(rates["plain"])
    for control in available:
        mine = statistics.median(rates[control])
        out[control] = {"per_s": mine, "plain_per_s": plain, "ratio": mine / plain}
    return out


def encryption_probe(url, n, rounds):
    """In a child process (settings with ENCRYPTION_KEYS): 1 KB enqueues, encrypted against plain."""
    try:
        setup_django(url, encryption=True)
        from queues import Queue
        from queues.conf import build_config

        build_config()
    except Exception as exc:
        return {"why": f"the settings are refused ({type(exc).__name__}: {exc})"}
    marker = os.urandom(16).hex()
    payload = (marker + "payload " * 125)[:1000]
    encrypted, plain = Queue(ENCRYPTED_QUEUE), Queue(PLAIN_QUEUE)
    encrypted.enqueue(payload)
    client = redis.Redis.from_url(url)
    client.config_set("rdbcompression", "no")  # DUMP as stored, so the search sees the bytes
    dumps = [client.dump(k) or b"" for k in client.scan_iter(f"worqr:{{{ENCRYPTED_QUEUE}}}:*")]
    if any(marker.encode() in d for d in dumps):
        return {"why": f"the payload is stored in plaintext in Redis (queue {ENCRYPTED_QUEUE} is in ENCRYPTED_QUEUES)"}
    rates = {"encrypted": [], "plain": []}
    for _ in range(rounds):
        rates["plain"].append(enqueue_rate(plain, n, payload))
        rates["encrypted"].append(enqueue_rate(encrypted, n, payload))
    mine, base = statistics.median(rates["encrypted"]), statistics.median(rates["plain"])
    return {"per_s": mine, "plain_per_s": base, "ratio": mine / base}


def chunk_drain(url, n, workdir):
    """Drain rates of n tasks, one worker, chunk=100 against one task per call, sync and async."""
    from queues.engine import handler

    if "chunk" not in inspect.signature(handler).parameters:
        return {"why": "worqr's @handler takes no chunk= yet"}
    os.environ["BENCH_REDIS_URL"] = url
    import common

    # The harness (its processes, producer and drain watch) is bench/bench.py; "bench" here names
    # the package bench/ (bench.worqr_settings), so it is loaded from its file.
    spec = importlib.util.spec_from_file_location("bench_harness", BENCH / "bench.py")
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    from adapters import worqr_adapter

    common.REDIS_URL = url
    log = open(Path(workdir) / "future-drain.log", "w")
    procs = harness.Procs({**os.environ, "PYTHONPATH": str(BENCH)}, log)
    args = dict(n=n, payload_bytes=64, latency_samples=2, latency_pause=0.02, step_timeout=600, drain_timeout=600)
    bench = harness.Bench(SimpleNamespace(**args), procs, redis.Redis.from_url(url))
    out = {}
    try:
        # Each ratio's two drains side by side, the async pair in the reverse order (ABBA): load
        # that rises or falls through the run weighs on both ratios alike.
        for variant in ("worqr", "worqr-chunk", "worqr-chunk-async", "worqr-async"):
            out[variant] = bench.drain(harness.Row(worqr_adapter, variant), 1, bulk=True)["drain_jobs_per_s"]
    finally:
        procs.stop_all()
        log.close()
    return {
        "per_s": out,
        "sync_ratio": out["worqr-chunk"] / out["worqr"],
        "async_ratio": out["worqr-chunk-async"] / out["worqr-async"],
    }


def report(results):
    lines = [f"## Features to come ({results['started']}, load average {results['loadavg'][0]:.1f})", ""]
    lines += ["| measure | figure |", "|---|--:|"]
    names = {
        "throttle": "enqueue with throttle= against plain",
        "debounce": "enqueue with debounce= against plain",
        "encryption": "enqueue of 1 KB, encrypted queue against plain",
    }
    for key, name in names.items():
        m = results[key]
        shown = f"{m['ratio']:.2f}× ({m['per_s']:,.0f} vs {m['plain_per_s']:,.0f}/s)" if "ratio" in m else None
        lines.append(f"| {name} | {shown or 'not available: ' + m['why']} |")
    c, n = results["chunk"], results["args"]["drain_n"]
    if "why" in c:
        lines.append(f"| drain of {n:,}, chunk=100 against one task per call | not available: {c['why']} |")
    else:
        rates = c["per_s"]
        lines.append(
            f"| drain of {n:,}, sync, chunk=100 against one per call | {c['sync_ratio']:.2f}× "
            f"({rates['worqr-chunk']:,.0f} vs {rates['worqr']:,.0f}/s) |"
        )
        lines.append(
            f"| drain of {n:,}, async, chunk=100 against one per call | {c['async_ratio']:.2f}× "
            f"({rates['worqr-chunk-async']:,.0f} vs {rates['worqr-async']:,.0f}/s) |"
        )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000, help="enqueues per mode and round (5,000)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds, medians (3)")
    ap.add_argument("--drain-n", type=int, default=100_000, help="tasks per chunk drain (100,000)")
    ap.add_argument("--quick", action="store_true", help="--n 1000 --rounds 1 --drain-n 10000")
    ap.add_argument("--encryption-probe", help=argparse.SUPPRESS)  # internal: the child, given the URL
    a = ap.parse_args()
    if a.quick:
        a.n, a.rounds, a.drain_n = 1000, 1, 10_000
    if a.encryption_probe:
        print(json.dumps(encryption_probe(a.encryption_probe, a.n, a.rounds)))
        return 0
    started = datetime.datetime.now().astimezone()
    results = {"started": started.isoformat(timespec="seconds"), "args": vars(a), "loadavg": os.getloadavg()}
    with tempfile.TemporaryDirectory() as workdir:
        server, r, url = start_redis(workdir)
        try:
            child = [sys.executable, __file__, "--encryption-probe", url, "--n", str(a.n), "--rounds", str(a.rounds)]
            cp = subprocess.run(child, capture_output=True, text=True, timeout=600)
            last = cp.stdout.strip().splitlines()[-1:] or [""]
            results["encryption"] = json.loads(last[0]) if cp.returncode == 0 else {"why": cp.stderr[-300:]}
            r.flushall()
            setup_django(url)
            results.update(controls(a.n, a.rounds))
            r.flushall()
            results["chunk"] = chunk_drain(url, a.drain_n, workdir)
        finally:
            server.stop()
    md = report(results)
    (BENCH / "results").mkdir(exist_ok=True)
    base = BENCH / "results" / f"future-{started:%Y%m%dT%H%M%S}"
    Path(f"{base}.json").write_text(json.dumps(results, indent=1))
    Path(f"{base}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
