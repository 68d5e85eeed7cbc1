"""The benchmark's own tools: the latency proxy (bench/latency_proxy.py) between a client and the
session's real Redis, and the goal lines bench/goals.py prints from results files."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "bench" / "latency_proxy.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def proxy(redis_server, tmp_path):
    """Start the proxy in front of the session's Redis: proxy(delay_ms, direction) -> (client, stats)."""
    started = []

    def start(delay_ms, direction="down"):
        port, stats = free_port(), tmp_path / f"stats-{len(started)}.json"
        argv = [sys.executable, str(PROXY), "--listen", str(port), "--upstream", f"127.0.0.1:{redis_server.port}"]
        argv += ["--delay-ms", str(delay_ms), "--direction", direction, "--stats", str(stats)]
        p = subprocess.Popen(argv, stderr=subprocess.PIPE)
        started.append(p)
        client = redis.Redis(port=port, socket_timeout=30)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert p.poll() is None and time.monotonic() < deadline, p.stderr.read().decode()
                time.sleep(0.05)

        def finish():
            """Stop the proxy (SIGTERM) and read what it says it did."""
            p.send_signal(signal.SIGTERM)
            p.wait(30)
            return json.loads(stats.read_text())

        return client, finish

    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


def round_trips(client, n=20):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.ping()
        times.append(time.perf_counter() - t0)
    return times


def test_every_reply_through_the_proxy_is_held_back_at_least_the_delay(proxy):
    """With 5 ms downstream no round trip through the proxy is faster than 5 ms; its stats say so."""
    client, finish = proxy(5)
    assert min(round_trips(client)) >= 0.005
    stats = finish()
    assert stats["down"]["delay_ms"] == 5 and stats["down"]["added_p50_ms"] >= 5
    assert stats["up"]["delay_ms"] == 0 and stats["up"]["added_max_ms"] == 0


def test_both_directions_add_the_delay_twice_and_up_alone_delays_requests(proxy):
    """--direction both makes a round trip >= 2 delays; --direction up delays the requests only."""
    client, finish = proxy(4, "both")
    assert min(round_trips(client)) >= 0.008
    assert finish()["up"]["added_p50_ms"] >= 4
    client, finish = proxy(4, "up")
    assert min(round_trips(client)) >= 0.004
    stats = finish()
    assert stats["up"]["added_p50_ms"] >= 4 and stats["down"]["added_max_ms"] == 0


def test_a_burst_pays_the_delay_once_not_once_per_reply(proxy):
    """500 pipelined INCRs, or 10 clients' PINGs at once, through a 300 ms proxy take one delay, not one per reply."""
    client, finish = proxy(300)
    pipe = client.pipeline(transaction=False)
    for _ in range(500):
        pipe.incr("bench-proxy-pipe")
    t0 = time.perf_counter()
    replies = pipe.execute()
    took = time.perf_counter() - t0
    assert replies == list(range(1, 501))
    assert 0.3 <= took < 1.5  # one delay (one per reply: 150 s)
    port = client.connection_pool.connection_kwargs["port"]
    clients = [redis.Redis(port=port, socket_timeout=30) for _ in range(10)]
    connecting = [threading.Thread(target=c.ping) for c in clients]  # connected, at once
    for t in connecting:
        t.start()
    for t in connecting:
        t.join(60)
    barrier, took = threading.Barrier(10), []

    def ping(c):
        barrier.wait()
        t0 = time.perf_counter()
        c.ping()
        took.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=ping, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    finish()
    assert len(took) == 10 and min(took) >= 0.3 and max(took) < 1.5  # held back one after another: >= 3 s


def test_large_values_and_concurrent_clients_pass_intact_and_in_order(proxy):
    """A 16 MB value crosses both ways byte for byte while 4 clients' pipelined writes all land."""
    client, finish = proxy(1, "both")
    value = os.urandom(16 * 1024 * 1024)
    errors = []

    def hammer(i):
        try:
            c = redis.Redis(port=client.connection_pool.connection_kwargs["port"], socket_timeout=60)
            for _ in range(20):
                pipe = c.pipeline(transaction=False)
                for j in range(50):
                    pipe.rpush(f"bench-proxy-list-{i}", j)
                pipe.execute()
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    client.set("bench-proxy-big", value)
    assert client.get("bench-proxy-big") == value
    for t in threads:
        t.join(120)
    assert errors == []
    for i in range(4):
        assert [int(x) for x in client.lrange(f"bench-proxy-list-{i}", 0, -1)] == list(range(50)) * 20
    stats = finish()
    assert stats["up"]["bytes"] > len(value) and stats["down"]["bytes"] > len(value)


def test_a_client_that_goes_closes_its_upstream_connection(proxy, redis_server):
    """When a client disconnects, the proxy closes its connection to Redis too (none left open)."""
    direct = redis.Redis(port=redis_server.port)
    before = len(direct.client_list())
    client, finish = proxy(1)
    clients = [redis.Redis(port=client.connection_pool.connection_kwargs["port"]) for _ in range(5)]
    for c in clients:
        c.ping()
    assert len(direct.client_list()) == before + 6
    for c in [client, *clients]:
        c.close()
    deadline = time.monotonic() + 30
    while len(direct.client_list()) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(direct.client_list()) == before
    finish()


def test_a_proxy_whose_upstream_is_gone_closes_the_client_instead_of_hanging(tmp_path):
    """With nothing listening upstream, a client's command fails with a connection error at once."""
    port = free_port()
    argv = [sys.executable, str(PROXY), "--listen", str(port), "--upstream", f"127.0.0.1:{free_port()}"]
    p = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not listening(port):
            assert time.monotonic() < deadline, "the proxy did not start listening"
            time.sleep(0.05)
        # one attempt: redis-py's default retries a connection error 3 times with a backoff of
        # up to seconds, which the bound below would measure instead of the proxy
        client = redis.Redis(port=port, socket_timeout=10, retry=Retry(NoBackoff(), 0))
        t0 = time.perf_counter()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        assert time.perf_counter() - t0 < 5
        assert p.poll() is None  # and the proxy goes on serving
    finally:
        p.terminate()
        p.wait(30)


def write_results(folder, kind, data, stamp="20300101T000000"):
    (folder / f"{kind}-{stamp}.json").write_text(json.dumps(data))


def run_summary(drains):
    """A harness results file (run-*.json) with the given {variant: (adapter, summary)} rows."""
    return {
        "contenders": {v: {"adapter": adapter} for v, (adapter, _) in drains.items()},
        "summary": {v: summary for v, (_, summary) in drains.items()},
    }


def goals(folder, *extra):
    cp = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "goals.py"), "--results", str(folder), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return {line.split(" | ")[0].strip("| "): line for line in cp.stdout.splitlines() if line.startswith("| ")}


def test_goals_compare_worqr_with_the_best_peer_never_with_a_floor_row(tmp_path):
    """The drain goal divides by the fastest peer (not worqr's other rows nor a floor row) and says PASS/FAIL."""
    lat = {"p50": 0.6, "p95": 0.9, "p99": 1.5}
    write_results(
        tmp_path,
        "run",
        run_summary(
            {
                "worqr": (
                    "worqr_adapter",
                    {
                        "drain_1p": 5000,
                        "drain_2p": 7000,
                        "enqueue_plain": 9000,
                        "enqueue_bulk": 100_000,
                        "latency_ms": lat,
                    },
                ),
                "worqr-processes": ("worqr_adapter", {"drain_1p": 99_000, "drain_2p": 99_000}),
                "huey": (
                    "huey_adapter",
                    {"drain_1p": 2000, "drain_2p": 4000, "enqueue_plain": 10_000, "latency_ms": lat},
                ),
                "rq-simple": ("rq_adapter", {"drain_1p": 400, "drain_2p": 500, "enqueue_bulk": 9000}),
                "floor-blpop": ("floor_adapter", {"drain_1p": 50_000, "latency_ms": {"p50": 0.5, "p99": 0.7}}),
            }
        ),
    )
    lines = goals(tmp_path)
    one = lines["drain, sync handler, 1 process: worqr / best peer (huey, 2,000/s)"]
    two = lines["drain, sync handler, 2 processes: worqr / best peer (huey, 4,000/s)"]
    assert "| 2.50× | ≥ 2.00× | PASS |" in one and "| 1.75× | ≥ 2.00× | FAIL |" in two
    assert "| 0.90× | ≥ 1.00× | FAIL |" in lines["enqueue one by one: worqr / huey"]
    assert "| 11.1× | ≥ 10.0× | PASS |" in lines["enqueue in bulk: worqr / best peer (rq-simple, 9,000/s)"]
    assert "| 0.60 ms | ≤ 0.75 ms | PASS |" in lines["idle pickup p50, worqr: at most the BLPOP floor + 0.25 ms"]
    assert "not measured: not in this run" in lines["idle pickup p99, worqr-async"]
    assert "not measured: bench/scale.py did not run" in lines["idle worker resident memory"]


def test_goals_fail_a_busy_pickup_whose_rate_was_not_held_and_read_only_this_run(tmp_path):
    """A pickup under load that missed its offered rate is FAIL with why; files older than --since are ignored."""
    busy = {
        "args": {"rate": 5000},
        "contenders": {
            "worqr": {
                "sent": 100_000,
                "offered_per_s": 5000,
                "completed_per_s": 4990,
                "backlog_at_stop": 50,
                "latency_ms": {"p50": 1, "p95": 2, "p99": 3},
            },
            "worqr-async": {
                "sent": 100_000,
                "offered_per_s": 5000,
                "completed_per_s": 3000,
                "backlog_at_stop": 40_000,
                "latency_ms": {"p50": 1, "p95": 2, "p99": 3},
            },
        },
    }
    write_results(tmp_path, "busy", busy)
    write_results(tmp_path, "scale", {"memory_per_task": {"worqr": 300}, "idle_rss_mib": 50}, stamp="20000101T000000")
    lines = goals(tmp_path, "--since", "1700000000")
    assert lines["pickup p99 while draining 5,000/s, worqr"].endswith("| 3.00 ms | < 5.00 ms | PASS |")
    assert "FAIL: the rate was not held" in lines["pickup p99 while draining 5,000/s, worqr-async"]
    assert "not measured: bench/scale.py did not run" in lines["Redis memory per pending task (100-byte payload)"]
    lines = goals(tmp_path)
    assert "| 300 B | ≤ 263 B | FAIL |" in lines["Redis memory per pending task (100-byte payload)"]
    assert "| 50.0 MiB | ≤ 60.0 MiB | PASS |" in lines["idle worker resident memory"]


def test_the_peers_environment_can_import_the_engine():
    """Every library queues.engine imports at module level is in bench/requirements.txt (its producer imports the engine there)."""
    import ast

    pinned = {
        line.split("==")[0].strip().lower().replace("-", "_")
        for line in (ROOT / "bench" / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    needed = {}
    for path in (ROOT / "queues" / "engine").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:  # module level only, not inside a try
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "queues":
                    needed.setdefault(top, path.relative_to(ROOT))
    assert needed, "no library found: the walk is broken"
    missing = {top: str(where) for top, where in needed.items() if top.lower() not in pinned}
    assert not missing, f"imported by the engine but not in bench/requirements.txt: {missing}"
