"""Pickup while draining: the latency of a task enqueued while the workers drain a steady stream.

    bench/.venv/bin/python bench/busy.py [--rate 5000] [--seconds 20] [--only worqr,worqr-async]

(``bench/run.sh`` makes bench/.venv.) For each contender, on a private redis-server (``--port``,
6393): its workers start (2 processes, ``--procs``); a producer process enqueues no-op tasks at
``--rate`` tasks/s for ``--seconds``, paced against the clock (catching up after a stall), in calls
of ``--batch`` tasks (10: the library's bulk call where it has one, so that one producer process
can offer the rate on this machine); about every 20 ms (``--pause``, x U(0.5, 1.5)) it enqueues,
on its own, a probe carrying its enqueue time, whose handler records how long it waited (the harness's idle-pickup probe, the same job,
among a stream instead of into an idle worker). Printed: the probes' p50 / p95 / p99, the rate the
producer offered and the rate the workers completed over the window, and the backlog left when the
producer stopped. A contender that did not keep up has its probes waiting behind the backlog; the
line says so. Results: results/busy-<time>.json.
"""

import argparse
import datetime
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as harness  # noqa: E402  (processes, private Redis, percentiles)
import common  # noqa: E402

CONTENDERS = ("worqr", "worqr-async")


def produce(module, rate, seconds, pause, batch, payload):
    """The producer process: ``rate`` tasks/s for ``seconds``, in calls of ``batch`` tasks (the
    library's bulk call, or a loop of enqueues), and every ~``pause`` s one probe on its own."""
    adapter = importlib.import_module(f"adapters.{module}")
    producer = adapter.Producer()
    send = producer.bulk if adapter.BULK and batch > 1 else producer.plain
    rng = random.Random(0)
    sent = probes = 0
    t0 = time.perf_counter()
    next_probe = t0 + pause * rng.uniform(0.5, 1.5)
    while True:
        now = time.perf_counter()
        if now - t0 >= seconds:
            break
        if now >= next_probe:
            producer.one(payload, time.time())
            sent, probes = sent + 1, probes + 1
            next_probe = now + pause * rng.uniform(0.5, 1.5)
        elif (now - t0) * rate - sent >= batch:
            send(batch, payload)
            sent += batch
        else:  # ahead of the clock: wait for the next call's turn (or the next probe)
            time.sleep(max(0.0, min((sent + batch) / rate - (now - t0), next_probe - now)))
    return {"sent": sent, "probes": probes, "seconds": time.perf_counter() - t0}


def measure(a, procs, r, row):
    r.flushall()
    workers = [procs.start(cmd) for cmd in row.adapter.worker_cmds(row.variant, a.procs)]
    try:
        probe = [sys.executable, str(HERE / "producer.py"), row.module, "latency", "--samples", "2"]
        subprocess.run(probe, cwd=HERE, env=procs.env, check=True, capture_output=True, timeout=60)  # workers up
        r.delete(common.LATENCY_KEY)
        base = int(r.get(common.DONE_KEY) or 0)
        argv = [sys.executable, __file__, "--produce", row.module, "--rate", str(a.rate)]
        argv += ["--seconds", str(a.seconds), "--pause", str(a.pause), "--batch", str(a.batch)]
        p = procs.start(argv, stdout=subprocess.PIPE)
        t0 = time.perf_counter()
        out, _ = p.communicate(timeout=a.seconds + 120)
        window = time.perf_counter() - t0
        procs.stop(p)
        if p.returncode:
            raise RuntimeError(f"the producer exited with {p.returncode} (see the .log)")
        done_at_stop = int(r.get(common.DONE_KEY) or 0) - base
        sent = json.loads(out.decode().strip().splitlines()[-1])
        deadline = time.monotonic() + 60
        while int(r.get(common.DONE_KEY) or 0) - base < sent["sent"] and time.monotonic() < deadline:
            time.sleep(0.05)
        lat = [float(x) for x in r.lrange(common.LATENCY_KEY, 0, -1)]
    finally:
        for w in workers:
            procs.stop(w)
    return {
        **sent,
        "offered_per_s": sent["sent"] / sent["seconds"],
        "completed_per_s": done_at_stop / window,
        "backlog_at_stop": sent["sent"] - done_at_stop,
        "probes_done": len(lat),
        "latency_ms": harness.percentiles(lat) if len(lat) >= 2 else None,
        "loadavg": os.getloadavg(),
    }


def report(results):
    a = results["args"]
    lines = [
        f"## Pickup while draining {a['rate']:,} tasks/s ({results['started']}, {a['procs']} worker processes "
        f"each, {a['seconds']:g} s per contender, load average {results['loadavg'][0]:.1f} at start)",
        "",
        "| contender | offered /s | completed /s | backlog when the producer stopped | probes | "
        "pickup p50 / p95 / p99 ms |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for label, m in results["contenders"].items():
        if "error" in m:
            lines.append(f"| {label} | failed: {m['error']} | | | | |")
            continue
        lat = m["latency_ms"]
        shown = f"{lat['p50']:.1f} / {lat['p95']:.1f} / {lat['p99']:.1f}" if lat else "-"
        lines.append(
            f"| {label} | {m['offered_per_s']:,.0f} | {m['completed_per_s']:,.0f} | {m['backlog_at_stop']:,} "
            f"| {m['probes_done']} of {m['probes']} | {shown} |"
        )
    lines.append(
        "\nA backlog of more than a few hundred tasks means the workers did not keep up with the offered rate: "
        "the probes then waited behind it."
    )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=5000, help="tasks offered per second (5,000)")
    ap.add_argument("--seconds", type=float, default=20, help="seconds of offered load per contender (20)")
    ap.add_argument("--pause", type=float, default=0.02, help="mean seconds between probes (0.02)")
    ap.add_argument("--batch", type=int, default=10, help="tasks per enqueue call, bulk where there is one (10)")
    ap.add_argument("--procs", type=int, default=2, help="worker processes per contender (2)")
    ap.add_argument("--only", default=",".join(CONTENDERS), help=f"row ids (default {','.join(CONTENDERS)})")
    ap.add_argument("--port", type=int, default=6393, help="private redis-server (6393)")
    ap.add_argument("--quick", action="store_true", help="5 s per contender")
    ap.add_argument("--produce", help=argparse.SUPPRESS)  # internal: run as the producer of that adapter
    a = ap.parse_args()
    if a.quick:
        a.seconds = 5
    if a.rate <= 0 or a.seconds <= 0 or a.pause <= 0 or a.procs < 1 or a.batch < 1:
        ap.error("--rate, --seconds, --pause, --batch and --procs must be > 0")
    if a.produce:
        print(json.dumps(produce(a.produce, a.rate, a.seconds, a.pause, a.batch, "x" * 64)))
        return 0
    os.environ["BENCH_REDIS_URL"] = common.REDIS_URL = f"redis://127.0.0.1:{a.port}/0"
    import adapters  # after the URL is set: adapters read it at import

    rows = {r.variant: r for r in (harness.Row(m, v) for m in adapters.load_all() for v in m.VARIANTS)}
    wanted = [v for v in a.only.split(",") if v]
    if not wanted or set(wanted) - set(rows):
        ap.error(f"--only takes row ids of: {', '.join(rows)}")
    now = datetime.datetime.now().astimezone()
    (HERE / "results").mkdir(exist_ok=True)
    base = HERE / "results" / f"busy-{now:%Y%m%dT%H%M%S}"
    results = {"started": now.isoformat(timespec="seconds"), "args": vars(a), "loadavg": os.getloadavg()}
    results["contenders"] = {}
    log = open(f"{base}.log", "w")
    procs = harness.Procs({**os.environ, "PYTHONPATH": str(HERE)}, log)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            r = harness.start_redis(procs, a.port, workdir)
            for variant in wanted:
                row = rows[variant]
                label = getattr(row.adapter, "LABELS", {}).get(variant, variant)
                try:
                    results["contenders"][label] = {"id": variant, **measure(a, procs, r, row)}
                except Exception as exc:
                    results["contenders"][label] = {"id": variant, "error": f"{type(exc).__name__}: {exc}"}
                print(f"[busy] {label}: {results['contenders'][label]}", file=sys.stderr, flush=True)
    finally:
        procs.stop_all()
        log.close()
    md = report(results)
    Path(f"{base}.json").write_text(json.dumps(results, indent=1))
    Path(f"{base}.md").write_text(md)
    print(md)
    print(f"results: {base}.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
