"""On Sidekiq's published terms: 500,000 no-op tasks enqueued in bulk, then drained, with and
without 1 ms of Redis latency; worqr with ``--processes 2`` beside each peer's best two-process
setup, in one run.

    bench/.venv/bin/python bench/sidekiq_terms.py [--n 500000] [--quick] [--only huey,...]

(``bench/run.sh`` makes bench/.venv.) One private redis-server (``--port``, 6394). For each
contender: one fill of N tasks with the library's bulk call if it has one (else one by one),
straight to Redis and timed; a snapshot of Redis (SAVE); then three drains by two worker
processes, each from the snapshot reloaded (DEBUG RELOAD NOSAVE), in an order that turns from one
contender to the next:

  direct      the workers talk to Redis itself;
  proxy 0 ms  through bench/latency_proxy.py forwarding at once: the proxy's own cost alone;
  proxy 1 ms  through it adding 1 ms to every chunk from Redis to the workers (``--delay-ms``),
              as Sidekiq's bin/sidekiqload does with Toxiproxy's downstream latency toxic.

Everything the workers and their handlers send goes through the proxy; the fill and the harness's
counter polling do not. A drain is timed as the harness times it (from the first finished task to
the N-th, polling the counter every 10 ms). worqr always drains all N (up to ``--timeout``); a
peer drains for at most ``--peer-cap`` seconds and its rate is over the tasks it did, marked *.
The latency's cost is "proxy 1 ms" against "proxy 0 ms" (both pay the proxy's hop); "direct" is
the figure without any proxy. Results: results/sidekiq-terms-<time>.json (+ .md).
"""

import argparse
import contextlib
import datetime
import json
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as harness  # noqa: E402  (the harness: processes, private Redis, producer, drain watch)
import common  # noqa: E402
import latency_proxy  # noqa: E402
import verdict  # noqa: E402

#: Sidekiq's published figure for this run (its README, "Performance"; bin/sidekiqload, LATENCY=1).
SIDEKIQ_RATE = 23_500
SIDEKIQ_SETUP = (
    "Sidekiq 7.0.3, Ruby 3.2.0 + YJIT, concurrency 30 in one process, 1 ms of latency added by Toxiproxy, "
    "on a larger machine than this one"
)
#: Each library's fastest two-process row in the main table (bench/run.sh, all contenders).
CONTENDERS = ("worqr-processes", "huey-threads", "dramatiq", "celery-solo", "arq-fastpoll", "rq-simple")
MODES = ("direct", "proxy-0", "proxy-1")
#: The goal: the 1 ms run keeps at least this share of the 0 ms run's rate (loses < 30 %).
KEEPS = 0.70


@contextlib.contextmanager
def workers_through(procs, url):
    """Workers started inside this block talk to ``url`` (adapters read common.REDIS_URL when they
    build a worker's command, and the worker process reads BENCH_REDIS_URL)."""
    saved = common.REDIS_URL, procs.env
    common.REDIS_URL, procs.env = url, {**procs.env, "BENCH_REDIS_URL": url}
    try:
        yield
    finally:
        common.REDIS_URL, procs.env = saved


def wait_port(port, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


class Run:
    def __init__(self, a, procs, r, workdir):
        self.a, self.procs, self.r, self.workdir = a, procs, r, Path(workdir)
        step_timeout = max(300.0, a.n / 500)  # the slowest one-by-one fill here is ~1,700 tasks/s
        args = dict(n=a.n, payload_bytes=64, latency_samples=2, latency_pause=0.02, step_timeout=step_timeout)
        self.bench = harness.Bench(SimpleNamespace(**args), procs, r)

    def fill(self, row):
        self.r.flushall()
        mode = "bulk" if row.adapter.BULK else "plain"
        seconds = self.bench.producer(row, mode)["seconds"]
        self.r.save()
        return {"enqueue_mode": mode, "enqueue_s": seconds, "enqueue_per_s": self.a.n / seconds}

    def drain(self, row, mode):
        self.r.execute_command("DEBUG", "RELOAD", "NOSAVE")  # the filled queue again
        if int(self.r.get(common.DONE_KEY) or 0):
            raise RuntimeError("the snapshot has finished tasks in it")
        peer = row.adapter.DIST != "worqr"
        timeout = min(self.a.peer_cap, self.a.timeout) if peer else self.a.timeout
        if mode == "direct":
            return self.bench.watch(row, 2, self.a.n, timeout)
        stats = self.workdir / f"proxy-{row.variant}-{mode}.json"
        delay = 0.0 if mode == "proxy-0" else self.a.delay_ms
        upstream = f"127.0.0.1:{self.a.port}"
        proxy = self.procs.start(latency_proxy.argv(sys.executable, self.a.proxy_port, upstream, delay, stats=stats))
        try:
            wait_port(self.a.proxy_port)
            with workers_through(self.procs, f"redis://127.0.0.1:{self.a.proxy_port}/0"):
                out = self.bench.watch(row, 2, self.a.n, timeout)
        finally:
            self.procs.stop(proxy)
        if stats.exists():
            out["proxy"] = json.loads(stats.read_text())
        return out


def rate_text(step):
    if not step or step.get("error"):
        return "failed" if step else "-"
    rate = step.get("drain_jobs_per_s")
    return "-" if rate is None else f"{rate:,.0f}{'' if step['complete'] else '*'}"


def summarize(results):
    """The printed table and goal lines (also saved as .md next to the JSON)."""
    a, rows = results["args"], results["contenders"]
    lines = [
        f"## On Sidekiq's terms: {a['n']:,} no-op tasks, bulk-enqueued then drained by 2 worker processes "
        f"({results['started']}, {results['seconds']:.0f} s, load average {results['loadavg'][0]:.1f} at start, "
        f"{results['loadavg_end'][0]:.1f} at end)",
        "",
        f"| contender (2 processes) | enqueue {a['n']:,} /s | drain /s, straight to Redis | through the proxy, 0 ms "
        f"| through the proxy, {a['delay_ms']:g} ms | {a['delay_ms']:g} ms / 0 ms | {a['delay_ms']:g} ms / direct "
        f"| time to drain all, {a['delay_ms']:g} ms |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for label, c in rows.items():
        d = c.get("drains", {})
        rate = {m: d.get(m, {}).get("drain_jobs_per_s") for m in MODES}
        keep = verdict.ratio(rate["proxy-1"], rate["proxy-0"])
        keep_direct = verdict.ratio(rate["proxy-1"], rate["direct"])
        slow = d.get("proxy-1", {})
        total = f"{slow['startup_s'] + slow['drain_s']:.1f} s" if slow.get("complete") and slow.get("drain_s") else "-"
        fill = c.get("fill", {})
        enq = (
            f"{fill['enqueue_per_s']:,.0f} ({fill['enqueue_mode']})" if "enqueue_per_s" in fill else c.get("error", "-")
        )
        ratios = [f"{x:.2f}" if x else "-" for x in (keep, keep_direct)]
        cells = [label, enq, *(rate_text(d.get(m)) for m in MODES), *ratios, total]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        f"\n\\* a peer drains for at most {a['peer_cap']:g} s: its rate is over the tasks it finished by then."
    )
    proxied = [
        d["proxy"] for c in rows.values() for m, d in c.get("drains", {}).items() if m == "proxy-1" and "proxy" in d
    ]
    if proxied:
        added = [p["down"].get("added_p50_ms") for p in proxied if p["down"].get("chunks")]
        p99 = [p["down"].get("added_p99_ms") for p in proxied if p["down"].get("chunks")]
        if added:
            lines.append(
                f"The proxy's added delay, Redis to workers, as measured by it: p50 {min(added):.2f}–{max(added):.2f} ms, "
                f"p99 {min(p99):.2f}–{max(p99):.2f} ms over the contenders' runs."
            )
    lines += ["", *verdict.HEADER, *results["goals"]]
    return "\n".join(lines) + "\n"


def goal_lines(worqr, rows, a):
    d = (worqr or {}).get("drains", {})
    with_lat, without, direct = (d.get(m, {}).get("drain_jobs_per_s") for m in ("proxy-1", "proxy-0", "direct"))
    peers = {
        k: c["drains"].get("proxy-1", {}).get("drain_jobs_per_s")
        for k, c in rows.items()
        if c.get("dist") != "worqr" and c.get("drains")
    }
    best = max(((v, k) for k, v in peers.items() if v), default=None)
    out = [
        verdict.check(
            f"worqr --processes 2, {a['delay_ms']:g} ms run / 0 ms run (loses < 30 %)",
            verdict.ratio(with_lat, without),
            KEEPS,
            fmt="{:.2f}",
        ),
        # Printed beside Sidekiq's figure, not held to it: that run was on another machine (the
        # goals are the 1 ms run's loss above and a chunk handler's rate below).
        verdict.info(
            f"worqr --processes 2 with {a['delay_ms']:g} ms beside Sidekiq's published {SIDEKIQ_RATE:,}/s "
            f"({SIDEKIQ_SETUP})",
            with_lat,
            "-",
            "a published figure, for comparison",
            fmt="{:,.0f}",
            unit="/s",
        ),
    ]
    if best:
        out.append(
            verdict.check(
                f"worqr --processes 2 with {a['delay_ms']:g} ms against the best peer's ({best[1]}, {best[0]:,.0f}/s)",
                verdict.ratio(with_lat, best[0]),
                1.0,
                fmt="{:.2f}",
                unit="×",
            )
        )
    chunk = a.get("chunk_why")
    if chunk:
        out.append(verdict.absent("≥ 20,000 tasks/s without latency with a chunk handler", "≥ 20,000/s", chunk))
        out.append(
            verdict.info(
                "worqr --processes 2 straight to Redis, one task per handler call",
                direct,
                "≥ 20,000/s",
                "no verdict: the goal is for a chunk handler",
                fmt="{:,.0f}",
                unit="/s",
            )
        )
    else:
        chunked = rows.get("worqr chunk=100", {}).get("drains", {}).get("direct", {}).get("drain_jobs_per_s")
        out.append(
            verdict.check(
                "worqr --processes 2, chunk handler, straight to Redis", chunked, 20_000, fmt="{:,.0f}", unit="/s"
            )
        )
    return out


def chunk_feature():
    """None when worqr's @handler takes ``chunk=`` (its own issue), else why not."""
    import inspect

    from queues.engine import handler

    return None if "chunk" in inspect.signature(handler).parameters else "worqr's @handler takes no chunk= yet"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500_000, help="tasks per contender (500,000, as Sidekiq's run)")
    ap.add_argument("--only", default=",".join(CONTENDERS), help=f"row ids (default {','.join(CONTENDERS)})")
    ap.add_argument("--modes", default=",".join(MODES), help=f"drains per contender (default {','.join(MODES)})")
    ap.add_argument("--delay-ms", type=float, default=1.0, help="the latency added, Redis to workers (1)")
    ap.add_argument("--peer-cap", type=float, default=30, help="seconds a peer's drain may take (30)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds worqr's drain may take (900)")
    ap.add_argument("--port", type=int, default=6394, help="private redis-server (6394); the proxy takes the next")
    ap.add_argument("--quick", action="store_true", help="N = 20,000 and peers capped at 10 s: a quick look")
    a = ap.parse_args()
    if a.quick:
        a.n, a.peer_cap = 20_000, 10
    a.proxy_port = a.port + 1
    modes = [m for m in a.modes.split(",") if m]
    if a.n < 1 or not modes or set(modes) - set(MODES):
        ap.error(f"--n must be >= 1 and --modes a list of {', '.join(MODES)}")
    os.environ["BENCH_REDIS_URL"] = common.REDIS_URL = f"redis://127.0.0.1:{a.port}/0"
    import adapters  # after the URL is set: adapters read it at import

    wanted = [v for v in a.only.split(",") if v]
    rows = {r.variant: r for r in (harness.Row(m, v) for m in adapters.load_all() for v in m.VARIANTS)}
    missing = [v for v in wanted if v not in rows]
    if missing:
        ap.error(f"unknown row id(s): {', '.join(missing)} (known: {', '.join(rows)})")
    a.chunk_why = chunk_feature()
    if a.chunk_why is None and "worqr-processes" in wanted:
        rows["worqr-chunk"] = harness.Row(rows["worqr-processes"].adapter, "worqr-chunk")
        wanted.append("worqr-chunk")

    now = datetime.datetime.now().astimezone()
    (HERE / "results").mkdir(exist_ok=True)
    base = HERE / "results" / f"sidekiq-terms-{now:%Y%m%dT%H%M%S}"
    results = {
        "started": now.isoformat(timespec="seconds"),
        "args": vars(a),
        "loadavg": os.getloadavg(),
        "contenders": {},
    }

    def on_signal(signum, frame):
        raise harness.Abort(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    t_run = time.perf_counter()
    log = open(f"{base}.log", "w")
    procs = harness.Procs({**os.environ, "PYTHONPATH": str(HERE)}, log)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            r = harness.start_redis(procs, a.port, workdir, extra=("--enable-debug-command", "local"))
            run = Run(a, procs, r, workdir)
            for i, variant in enumerate(wanted):
                row = rows[variant]
                label = getattr(row.adapter, "LABELS", {}).get(variant, variant)
                entry = results["contenders"][label] = {"dist": row.adapter.DIST, "drains": {}}
                t0 = time.perf_counter()
                try:
                    entry["fill"] = run.fill(row)
                except Exception as exc:
                    entry["error"] = f"fill failed: {type(exc).__name__}: {exc}"
                    print(f"[terms] {label}: {entry['error']}", file=sys.stderr, flush=True)
                    continue
                print(f"[terms] {label}: filled {a.n:,} in {entry['fill']['enqueue_s']:.1f} s", file=sys.stderr)
                for mode in modes[i % len(modes) :] + modes[: i % len(modes)]:
                    try:
                        step = run.drain(row, mode)
                    except Exception as exc:
                        step = {"error": f"{type(exc).__name__}: {exc}"}
                    step["loadavg"] = os.getloadavg()
                    entry["drains"][mode] = step
                    print(
                        f"[terms] {label} {mode:8} {rate_text(step)}/s {step.get('error', '')}",
                        file=sys.stderr,
                        flush=True,
                    )
                entry["seconds"] = time.perf_counter() - t0
    except harness.Abort as exc:
        results["aborted"] = repr(exc)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        procs.stop_all()
        log.close()
    results["seconds"], results["loadavg_end"] = time.perf_counter() - t_run, os.getloadavg()
    worqr = next((c for c in results["contenders"].values() if c.get("dist") == "worqr"), None)
    results["goals"] = goal_lines(worqr, results["contenders"], vars(a))
    md = summarize(results)
    Path(f"{base}.json").write_text(json.dumps(results, indent=1))
    Path(f"{base}.md").write_text(md)
    print(md)
    print(f"results: {base}.json", file=sys.stderr)
    return 1 if "aborted" in results else 0


if __name__ == "__main__":
    sys.exit(main())
