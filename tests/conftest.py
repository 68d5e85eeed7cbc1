"""Test session: a real Redis on a free port (started here, never mocked), the engine pointed at
it, and helpers to run real worker processes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from queues.testing import RedisServer
from tests.stress import RedisStalls

# A test run started in the background by a shell without job control (`cmd &` in a script, some
# CI runners) inherits SIGINT ignored, and so would every process the tests start. The worker and
# the demo rightly keep an ignored SIGINT (a supervisor's workers are started so), so a test's
# Ctrl-C would reach nothing there. The tests start their processes as a terminal would: SIGINT
# handled here, so not ignored in the children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"

#: The shared fixtures of tests/support/: ``hooks`` (api), ``spans`` and ``traced`` (tracing), and the
#: browser tests' ``operator``, ``server`` and ``page`` (browser). A test file's own fixture of the
#: same name wins over these.
pytest_plugins = ["tests.support.api", "tests.support.browser", "tests.support.tracing"]

#: ``WORQR_TEST_REDIS=cluster`` runs the session on a real Redis Cluster (3 masters, 3
#: replicas: ``tests.cluster_servers``) instead of one redis-server (``make test`` runs the
#: engine, worker, lock, lifecycle and dashboard tests both ways).
ON_CLUSTER = os.environ.get("WORQR_TEST_REDIS", "") == "cluster"

if ON_CLUSTER:
    from tests.cluster_servers import RedisCluster

    _server, _cluster = None, RedisCluster().start()
    _url = _cluster.url
else:
    _server, _cluster = RedisServer().start(), None
    _url = _server.url
os.environ["WORQR_REDIS_URL"] = _url  # read by tests/settings.py and worker processes


def pytest_configure(config):
    config.addinivalue_line("markers", "stress: a stress test of the engine's guarantees (tests/test_stress_*.py)")


def pytest_unconfigure(config):
    for server in (_server, _cluster):
        if server is not None:
            server.stop()
    # The session's SQLite database is in WAL mode (tests/settings.py): its log and index files
    # outlive it when a connection was not closed (a killed worker); Django removes only the file.
    db = os.environ.get("WORQR_TEST_DB")
    if db and not os.path.exists(db):
        for leftover in (f"{db}-wal", f"{db}-shm"):
            if os.path.exists(leftover):
                os.remove(leftover)


@pytest.fixture(scope="session")
def django_db_modify_db_settings_xdist_suffix():
    """No ``_gw0`` suffix on the test databases under pytest-xdist: tests/settings.py already names
    them after the session's process, and the worker processes a test starts find them by that
    name (WORQR_TEST_DB, WORQR_TEST_PG_DB); a suffix would give those workers an empty database."""


@pytest.fixture(scope="session")
def redis_server():
    """The one test redis-server (tests that stop or reconfigure it are skipped on a cluster)."""
    if _server is None:
        pytest.skip("needs the single test redis-server (this session runs on a Redis Cluster)")
    return _server


@pytest.fixture(scope="session")
def redis_cluster():
    """The session's Redis Cluster, when it runs on one (WORQR_TEST_REDIS=cluster)."""
    if _cluster is None:
        pytest.skip("runs only on a Redis Cluster (WORQR_TEST_REDIS=cluster)")
    return _cluster


@pytest.fixture(autouse=True)
def _engine():
    """Every test starts on an empty Redis, with the engine's connection pointing at it."""
    from queues.conf import build_config
    from queues.engine import connection

    if _server is not None and _server.proc is None:
        _server.start()
    conn = connection.configure(build_config(), _url)
    conn.client.flushall()
    yield conn


@pytest.fixture
def client(_engine):
    return _engine.client


@pytest.fixture
def conn(_engine):
    return _engine


def manage(*args, settings="tests.settings", timeout=60):
    """``python manage.py *args`` run to its end (the session's Redis in its environment), its
    output kept: a CompletedProcess with text stdout and stderr."""
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=dict(os.environ, DJANGO_SETTINGS_MODULE=settings),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class WorkerProcess:
    """``python manage.py worker`` in its own process group, with its output kept."""

    def __init__(self, queues, concurrency=1, name=None, grace=None, env=None, settings="tests.settings", options=()):
        self.log_path = ARTIFACTS / f"worker-{time.time_ns()}.log"
        ARTIFACTS.mkdir(exist_ok=True)
        args = [sys.executable, str(ROOT / "manage.py"), "worker", *queues, "--concurrency", str(concurrency)]
        if name:
            args += ["--name", name]
        if grace is not None:
            args += ["--grace", str(grace)]
        args += list(options)  # more options of the command
        full_env = dict(os.environ, DJANGO_SETTINGS_MODULE=settings, PYTHONUNBUFFERED="1", **(env or {}))
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=full_env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.name = name

    @property
    def pid(self):
        return self.proc.pid

    def output(self):
        return self.log_path.read_text()

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def wait(self, timeout=30):
        return self.proc.wait(timeout)

    def close(self):
        self.kill()
        self.log.close()


@pytest.fixture
def workers():
    """Start worker processes: ``workers(["t1"], concurrency=4)``; all are killed at the end."""
    started = []

    def start(queues, **kwargs):
        w = WorkerProcess(queues, **kwargs)
        started.append(w)
        return w

    yield start
    for w in started:
        w.close()


def wait_for(predicate, timeout=30.0, interval=0.02, message="condition"):
    """Poll ``predicate`` until it returns a truthy value; fail the test after ``timeout``. The
    default is generous: a wait often includes a worker process starting (Python, Django, the
    handlers' imports), which takes seconds on a loaded machine; a passing test never waits it out."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {message() if callable(message) else message}")
        time.sleep(interval)


def records(client, queue):
    return [json.loads(r) for r in client.lrange(f"test:log:{queue}", 0, -1)]


def wait_registered(client, name, timeout=30.0):
    from queues.engine import readmodel

    return wait_for(
        lambda: any(w["name"] == name for w in readmodel.workers(client)), timeout, message=f"worker {name} to register"
    )


@pytest.fixture
def slowlog(client):
    """SLOWLOG of the test Redis: ``slowlog(threshold_us)`` sets the threshold and empties the
    log (read it with tests.stress.slow_commands); the settings are restored at the end."""
    saved = {k: client.config_get(k)[k] for k in ("slowlog-log-slower-than", "slowlog-max-len")}

    samplers = []

    def arm(threshold_us):
        """Also starts a tests.stress.RedisStalls, returned: pass it to slow_commands."""
        client.config_set("slowlog-max-len", 10000)
        client.config_set("slowlog-log-slower-than", threshold_us)
        client.slowlog_reset()
        samplers.append(RedisStalls(client))
        return samplers[-1]

    yield arm
    for sampler in reversed(samplers):  # each puts back the scripts.run it found
        sampler.stop()
    for key, value in saved.items():
        client.config_set(key, value)
    client.slowlog_reset()


def subscribers(client, channel):
    """How many connections are subscribed to ``channel`` (on a cluster: over every node, as
    each subscriber holds its subscription on one node)."""
    from queues.engine.connection import is_cluster

    if not is_cluster(client):
        return dict(client.pubsub_numsub(channel)).get(channel.encode(), 0)
    return sum(
        dict(client.pubsub_numsub(channel, target_nodes=node)).get(channel.encode(), 0) for node in client.get_nodes()
    )


def kill_pubsub_connections(client):
    """CLIENT KILL TYPE pubsub (on a cluster: on every node)."""
    from queues.engine.connection import is_cluster

    if not is_cluster(client):
        return client.client_kill_filter(_type="pubsub")
    return sum(client.client_kill_filter(_type="pubsub", target_nodes=node) for node in client.get_nodes())
