"""Benchmarks of the dashboard.

``.venv/bin/python bench/dashboard.py [N]``: the queue page with a deep queue.

Fills a throw-away queue with N pending tasks (default 1,000,000, in batches of 10,000), then
times the queue page's server time (the whole Django view: Redis reads and template) on its
first, middle and last page, and prints one line. The queue is dropped afterwards. Runs with
the project's settings (``DJANGO_SETTINGS_MODULE``, ``WORQR_REDIS_URL``); needs no database.

``.venv/bin/python bench/dashboard.py --live [--seconds S] [--rate R] [--probes P]``: event to
screen. A Daphne and a worker (``bench/dashboard_settings.py``: a no-op handler on ``bench-live``) run in
their own processes, with a temporary database and the Redis of ``WORQR_REDIS_URL`` (or the
embedded one); a producer enqueues R tasks a second (default 5,000) while headless Chromium
(``/usr/bin/chromium``) shows the queue page. Every 0.25 s a probe task is enqueued (delayed, so
it sits in the page's Delayed table): its latency is from the enqueue call to the moment its row
is in the page's DOM (a MutationObserver stamps it). Prints the p50/p95 of P probes, the rate the
worker achieved and the page's CPU (Chromium's task time over wall time, from the DevTools
protocol).
"""

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import django

BENCH = Path(__file__).resolve().parent
PROJECT = BENCH.parent
sys.path[:0] = [str(PROJECT)]  # the project's packages (queues, worqr_site, bench), run as a script


def measure(n=1_000_000, runs=15):
    # Here, not at the top: after django.setup() (main), as models can only be imported then.
    from django.contrib.auth.models import User
    from django.test import RequestFactory
    from queues import Queue
    from queues.dashboard.bounds import page_count
    from queues.dashboard.views.queue import queue as queue_view

    name = f"bench-dashboard-{os.getpid()}"
    q = Queue(name)
    try:
        started = time.perf_counter()
        for start in range(0, n, 10_000):
            q.enqueue_many([f'{{"n": {i}}}' for i in range(start, min(n, start + 10_000))])
        fill = time.perf_counter() - started
        user = User(username="bench", is_staff=True, is_superuser=True, is_active=True)
        factory = RequestFactory()
        results = {}
        last = page_count(n)
        for label, page in (("first", 1), ("middle", last // 2), ("last", last)):
            times = []
            for _ in range(runs):
                request = factory.get(f"/queues/q/{name}/", {"page": page})
                request.user = user
                t0 = time.perf_counter()
                response = queue_view(request, name)
                times.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200, response.status_code
            results[label] = statistics.median(times)
        return {"n": n, "fill_s": fill, **results}
    finally:
        q.drop()


OBSERVER = """() => {
  window.__seen = {};
  const stamp = (el) => { const id = el.dataset.id; if (id && !(id in window.__seen))
    window.__seen[id] = performance.timeOrigin + performance.now(); };
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) {
      if (n.nodeType !== 1) continue;
      if (n.dataset && n.dataset.id) stamp(n);
      for (const el of n.querySelectorAll("[data-id]")) stamp(el);
    }
  }).observe(document.body, { childList: true, subtree: true });
}"""


#: Stamps when a socket message first names a task (the delayed section's rows): the server's part
#: of the latency ends there, the page's begins.
ARRIVALS = r"""
window.__arrived = {};
const WqSocket = window.WebSocket;
window.WebSocket = function (...args) {
  const ws = new WqSocket(...args);
  ws.addEventListener("message", (ev) => {
    const at = performance.timeOrigin + performance.now();
    for (const m of ev.data.matchAll(/data-id=\\"([^"\\]+)\\"/g)) if (!(m[1] in window.__arrived)) window.__arrived[m[1]] = at;
  });
  return ws;
};
window.WebSocket.prototype = WqSocket.prototype;
"""


def live(seconds=20.0, rate=5000, probes=60):
    """Run the live bench (see the module's docstring); returns its figures."""
    tmp = Path(tempfile.mkdtemp(prefix="worqr-bench-live-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.dashboard_settings"
    os.environ["WORQR_DB_PATH"] = str(tmp / "db.sqlite3")
    django.setup()
    # Here, after django.setup(): the settings are chosen above, and models need them.
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from playwright.sync_api import sync_playwright
    from queues import Queue
    from queues.conf import get_connection
    from queues.engine import readmodel

    from bench.dashboard_settings import BENCH_QUEUE

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("bench", password="bench-live-pw")
    env = dict(os.environ, PYTHONUNBUFFERED="1", WORQR_REDIS_URL=get_connection().config.redis_url or "")
    port = _free_port()
    logs = open(tmp / "processes.log", "w")
    daphne = os.path.join(os.path.dirname(sys.executable), "daphne")
    procs = [
        subprocess.Popen(
            [daphne, "-b", "127.0.0.1", "-p", str(port), "worqr_site.asgi:application"],
            cwd=PROJECT,
            env=env,
            stdout=logs,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ),
        subprocess.Popen(
            [sys.executable, str(PROJECT / "manage.py"), "worker", BENCH_QUEUE, "--concurrency", "64"],
            cwd=PROJECT,
            env=env,
            stdout=logs,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ),
    ]
    q = Queue(BENCH_QUEUE)
    stop = threading.Event()
    try:
        _wait_http(f"http://127.0.0.1:{port}/admin/login/")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(ARRIVALS)
            page.goto(f"http://127.0.0.1:{port}/admin/login/?next=/queues/q/{BENCH_QUEUE}/")
            page.fill("#id_username", "bench")
            page.fill("#id_password", "bench-live-pw")
            q.enqueue("warm-up")  # the queue must exist for its page
            page.click("input[type=submit]")
            page.wait_for_selector("#wq-status.wq-live", timeout=30000)
            page.evaluate(OBSERVER)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")

            def produce():
                batch = max(1, rate // 10)
                while not stop.is_set():
                    began = time.monotonic()
                    q.enqueue_many(["x"] * batch)
                    stop.wait(max(0.0, 0.1 - (time.monotonic() - began)))

            producer = threading.Thread(target=produce, daemon=True)
            client = get_connection().client
            done_before, t_start = q.counts()["completed"], time.monotonic()
            cpu_before = _task_seconds(cdp)
            producer.start()
            latencies, server, calls, deadline = [], [], [], time.monotonic() + seconds
            while len(latencies) < probes and time.monotonic() < deadline + 30:
                sent = time.time()
                probe = q.enqueue("probe", delay=3600)
                seen = None
                wait_until = time.monotonic() + 5
                while seen is None and time.monotonic() < wait_until:
                    seen = page.evaluate("(id) => window.__seen[id] || null", probe)
                    if seen is None:
                        time.sleep(0.2)  # the page stamps the time itself: polling often only adds load
                if seen is not None:
                    # From Redis's clock when the enqueue was applied (the event), not from the
                    # call: a call slowed by this process's own producer thread is not the page's.
                    created = q.get(probe).created_at.timestamp() * 1000
                    latencies.append(seen - created)
                    arrived = page.evaluate("(id) => window.__arrived[id] || null", probe)
                    if arrived is not None:
                        server.append(arrived - created)
                    calls.append(created - sent * 1000)
                q.delete(probe)
                time.sleep(0.25)
            elapsed = time.monotonic() - t_start
            cpu = (_task_seconds(cdp) - cpu_before) / elapsed * 100
            stop.set()
            producer.join(5)
            done = q.counts()["completed"] - done_before
            backlog = q.counts()["pending"]
            browser.close()
        latencies.sort()
        return {
            "probes": len(latencies),
            "p50": statistics.median(latencies) if latencies else None,
            "p95": latencies[max(0, int(len(latencies) * 0.95) - 1)] if latencies else None,
            "server_p50": statistics.median(server) if server else None,
            "server_p95": sorted(server)[max(0, int(len(server) * 0.95) - 1)] if server else None,
            "call_p50": statistics.median(calls) if calls else None,
            "rate": done / elapsed,
            "target": rate,
            "cpu": cpu,
            "backlog": backlog,
            "redis_subscribers": readmodel.subscriber_connections(client),
        }
    finally:
        stop.set()
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
        logs.close()
        try:
            q.drop()
        except Exception:  # best effort: Redis may be gone
            pass


def _task_seconds(cdp):
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return metrics.get("TaskDuration", 0.0)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _option(argv, name, default, kind):
    if name in argv:
        return kind(argv[argv.index(name) + 1])
    return default


def main(argv):
    if "--live" in argv:
        r = live(
            seconds=_option(argv, "--seconds", 20.0, float),
            rate=_option(argv, "--rate", 5000, int),
            probes=_option(argv, "--probes", 60, int),
        )
        print(
            f"dashboard live, queue page under {r['target']:,} tasks/s offered ({r['rate']:,.0f}/s completed by one "
            f"worker, {r['backlog']:,} left): event to screen p50 {r['p50']:.0f} ms, p95 {r['p95']:.0f} ms over "
            f"{r['probes']} probes (server's part, event to the socket message: p50 {r['server_p50'] or 0:.0f} ms, "
            f"p95 {r['server_p95'] or 0:.0f} ms; the enqueue call's own delay p50 {r['call_p50'] or 0:.0f} ms); page CPU {r['cpu']:.0f} % of a core; Redis subscribers: {r['redis_subscribers']}"
        )
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "worqr_site.settings")
    django.setup()
    n = int(argv[1]) if len(argv) > 1 else 1_000_000
    r = measure(n)
    print(
        f"dashboard queue page, {r['n']:,} pending: server time (median) first page {r['first']:.1f} ms, "
        f"middle {r['middle']:.1f} ms, last {r['last']:.1f} ms (fill {r['fill_s']:.0f} s)"
    )


if __name__ == "__main__":
    main(sys.argv)
