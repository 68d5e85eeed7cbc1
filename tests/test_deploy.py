"""The deployment files in deploy/ (docs/deploying.md): the systemd units parse, the worker's unit
stops gracefully, the Redis settings load into a real redis-server, and the health check the
guide gives answers by exit status."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import redis

from queues.testing import free_port, redis_binary
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"
UNITS = ["worqr-web.service", "worqr-worker@.service", "worqr.target"]


def unit(name):
    """{key: [values]} of a unit file's [Service] (and other) lines."""
    out = {}
    for line in (DEPLOY / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed (systemd)")
def test_the_unit_files_pass_systemd_analyze_verify(tmp_path):
    """systemd-analyze verify accepts the units with no warning (the install paths replaced by this checkout and ..."""
    # ... its virtualenv, since verify checks that the commands exist).
    bin_dir = str(Path(sys.executable).parent)
    for name in UNITS:
        text = (DEPLOY / name).read_text()
        text = text.replace("/srv/worqr/venv/bin", bin_dir).replace("/srv/worqr/app", str(ROOT))
        (tmp_path / name).write_text(text)
    out = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / n) for n in UNITS)], capture_output=True, text=True, timeout=60
    )
    ours = [line for line in (out.stdout + out.stderr).splitlines() if "worqr" in line]
    assert out.returncode == 0 and not ours, out.stdout + out.stderr


def test_the_worker_unit_stops_gracefully():
    """SIGTERM goes to the worker alone, and systemd waits longer than the worker's --grace."""
    worker = unit("worqr-worker@.service")
    (command,) = worker["ExecStart"]
    grace = float(re.search(r"--grace (\S+)", command)[1])
    assert worker["KillSignal"] == ["SIGTERM"] and worker["KillMode"] == ["mixed"]
    assert float(worker["TimeoutStopSec"][0]) >= grace + 10
    assert "manage.py worker $WORQR_QUEUES" in command and "--log-format json" in command


def test_the_redis_settings_load_into_redis_server():
    """deploy/redis.conf starts a real redis-server with AOF, noeviction and compact task hashes."""
    version = subprocess.run([redis_binary(), "--version"], capture_output=True, text=True).stdout
    if int(re.search(r"v=(\d+)", version)[1]) < 7:
        pytest.skip(f"redis-server {version.split()[2]} predates hash-max-listpack-value (Redis 7)")
    port, workdir = free_port(), tempfile.mkdtemp(prefix="worqr-test-redis-conf-")
    proc = subprocess.Popen(
        [
            redis_binary(),
            str(DEPLOY / "redis.conf"),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            workdir,
            "--save",
            "",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        client = redis.Redis(port=port, socket_connect_timeout=0.5)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert proc.poll() is None, proc.stdout.read().decode()
                time.sleep(0.05)
        got = {
            k: client.config_get(k)[k]
            for k in ("appendonly", "appendfsync", "maxmemory-policy", "maxmemory", "hash-max-listpack-value")
        }
        assert got == {
            "appendonly": "yes",
            "appendfsync": "everysec",
            "maxmemory-policy": "noeviction",
            "maxmemory": str(2 * 1024**3),
            "hash-max-listpack-value": "1024",
        }
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def test_the_health_check_fails_with_a_clear_message_when_redis_is_down():
    """`manage.py queues --json` exits 0 with the counts, or 1 with a one-line error, never a traceback."""

    def queues(**env):
        return subprocess.run(
            [sys.executable, "manage.py", "queues", "--json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings", **env),
        )

    ok = queues()
    assert ok.returncode == 0, ok.stderr
    assert set(json.loads(ok.stdout)) == {"queues", "workers"}
    down = queues(WORQR_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    assert down.returncode == 1
    assert down.stderr.startswith("CommandError: Redis can't be reached:") and "Traceback" not in down.stderr
