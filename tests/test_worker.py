"""Real worker processes: every task exactly once, FIFO, async handlers, and the worker command's
bad-input errors."""

import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from queues import Queue
from tests.conftest import ROOT, manage, records, wait_for


def test_20000_tasks_three_workers_each_task_runs_exactly_once(client, workers):
    """3 worker processes at concurrency 4 drain 20,000 tasks; each runs once, none is lost."""
    q = Queue("t1")
    ids = []
    for start in range(0, 20000, 5000):
        ids += q.enqueue_many([f"task {i}" for i in range(start, start + 5000)])
    for i in range(3):
        workers(["t1"], concurrency=4, name=f"bulk-{i}")
    wait_for(lambda: q.counts()["completed"] == 20000, timeout=120, interval=0.2, message="20,000 completions")
    runs = Counter(r["id"] for r in records(client, "t1"))
    assert set(runs) == set(ids)
    assert max(runs.values()) == 1
    assert len({r["pid"] for r in records(client, "t1")}) == 3  # all three took part
    counts = q.counts()
    assert (counts["pending"], counts["active"], counts["failed"]) == (0, 0, 0)


def test_fifo_with_one_worker_at_concurrency_1(client, workers):
    """One worker with one slot runs tasks in the order they were enqueued."""
    q = Queue("t2")
    ids = q.enqueue_many([str(i) for i in range(300)])
    workers(["t2"], concurrency=1)
    wait_for(lambda: q.counts()["completed"] == 300, timeout=60, message="300 completions")
    assert [r["id"] for r in records(client, "t2")] == ids


def test_async_handler_and_raw_bytes_payload(client, workers):
    """An async def handler runs, and a bytes payload reaches it byte for byte, as bytes."""
    q = Queue("a1")
    blob = bytes(range(256))
    q.enqueue(blob)
    q.enqueue('{"sleep": 0.05}')
    workers(["a1"], concurrency=2)
    wait_for(lambda: q.counts()["completed"] == 2, timeout=20, message="2 completions")
    recs = {r["bytes"]: r for r in records(client, "a1")}
    assert bytes.fromhex(recs[True]["payload"]) == blob
    assert json.loads(recs[False]["payload"]) == {"sleep": 0.05}


def test_engine_import_leaves_out_the_opentelemetry_metrics_sdk_redis_would_load():
    """A worker does not carry OpenTelemetry's metrics SDK and psutil (3 MiB) for redis-py; the application still can."""
    pytest.importorskip("opentelemetry.sdk.metrics")
    code = (
        "import sys, queues.engine, redis.observability.providers as p;"
        "print('opentelemetry.sdk.metrics' in sys.modules, 'psutil' in sys.modules);"
        "from opentelemetry.sdk.metrics import MeterProvider; print(MeterProvider.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "MeterProvider"]


def test_worker_process_leaves_out_the_web_only_apps():
    """`manage.py worker` runs without the admin, sessions, static files, channels and CSP apps; other commands keep them."""
    code = (
        "import sys; sys.argv[:] = ['manage.py'] + sys.argv[1:];"
        "import django; django.setup(); from django.apps import apps;"
        "print(*(apps.is_installed(a) for a in ('django.contrib.admin', 'channels', 'csp', 'queues')))"
    )
    env = dict(__import__("os").environ, DJANGO_SETTINGS_MODULE="tests.settings")

    def run(*argv):
        return subprocess.run(
            [sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env
        )

    worker, other = run("worker", "t1"), run("shell")
    assert worker.returncode == 0 and other.returncode == 0, worker.stderr + other.stderr
    assert worker.stdout.split() == ["False", "False", "False", "True"]
    assert other.stdout.split() == ["True", "True", "True", "True"]


def test_worker_refuses_a_queue_without_handler(client):
    """Asking a worker to serve a queue with no handler is a clear error, and nothing is written."""
    result = manage("worker", "nohandler")
    assert result.returncode != 0
    assert "has no handler" in result.stderr
    assert client.dbsize() == 0


def test_worker_refuses_a_bad_queue_name(client):
    """manage.py worker with a malformed queue name exits with an error and writes nothing."""
    result = manage("worker", "bad:name")
    assert result.returncode != 0 and "queue name" in result.stderr
    assert client.dbsize() == 0


def test_enqueue_and_queues_commands(client):
    """`enqueue` prints one id per line (stdin with '-'); `queues --json` shows the counts."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "enqueue", "t3", "one", "-"],
        cwd=ROOT,
        input="two\nthree\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(__import__("os").environ, DJANGO_SETTINGS_MODULE="tests.settings"),
    )
    assert out.returncode == 0, out.stderr
    ids = out.stdout.split()
    assert len(ids) == 3 and all(i.startswith("t3-") for i in ids)
    assert [Queue("t3").get(i).payload for i in ids] == ["one", "two", "three"]
    data = json.loads(manage("queues", "--json").stdout)
    assert {q["name"]: q["pending"] for q in data["queues"]} == {"t3": 3}
    bad = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "enqueue", "t3", "-"],
        cwd=ROOT,
        input="x" * (1024 * 1024 + 1) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(__import__("os").environ, DJANGO_SETTINGS_MODULE="tests.settings"),
    )
    assert bad.returncode != 0 and "over the limit" in bad.stderr
    assert Queue("t3").counts()["pending"] == 3


def test_a_healthy_worker_starts_tasks_without_extra_round_trips(client, workers, redis_server):
    """A worker that has been up longer than the heartbeat TTL, and is beating, runs a task with no Redis ..."""
    # ... command of its own besides the scripts (the check for an unresponsive worker is not made while heartbeats
    # succeed).
    from queues.engine import readmodel

    q = Queue("t4")
    w = workers(["t4"], concurrency=1, name="healthy")
    wait_for(lambda: any(x["name"] == "healthy" for x in readmodel.workers(client)), message="register")
    time.sleep(4.5)  # past the 3 s TTL, several heartbeats later
    seen = []
    with client.monitor() as m:
        q.enqueue_many(["a", "b", "c"])
        deadline = time.monotonic() + 60  # a ceiling only: the loop ends when the three are done
        for cmd in m.listen():
            seen.append(cmd)
            if q.counts()["completed"] == 3 or time.monotonic() > deadline:
                break
    assert q.counts()["completed"] == 3
    direct = [c["command"] for c in seen if c.get("client_type") != "lua" and c["command"].upper().startswith("HMGET")]
    assert direct == [], direct
    assert w.proc.poll() is None
