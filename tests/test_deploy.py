"""The deployment files in deploy/ (docs/deploying.md): the systemd units parse, the worker's unit
stops gracefully, the Redis settings load into a real redis-server, and the health check the
guide gives answers by exit status."""

import json
import os
import re
import secrets
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
from tests.support.package import readme_files

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


GUIDE = ROOT / "docs" / "deploying.md"


def guide_settings():
    """The deploy guide's settings block (added at the end of the project's settings)."""
    section = GUIDE.read_text().split("## Django settings", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n# mysite/settings\.py: add at the end\n(.*?)```", section, re.S)
    return block


def example_env():
    """deploy/worqr.env.example's variables."""
    lines = (DEPLOY / "worqr.env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


@pytest.fixture(scope="module")
def guide_project(tmp_path_factory):
    """A new project (startproject, startapp jobs) set up as the README says, plus the deploy guide's
    settings; (its directory, a runner of its manage.py with deploy/worqr.env.example's variables)."""

    root = tmp_path_factory.mktemp("guide")
    subprocess.run([sys.executable, "-m", "django", "startproject", "mysite"], cwd=root, check=True, timeout=60)
    project = root / "mysite"
    subprocess.run([sys.executable, "manage.py", "startapp", "jobs"], cwd=project, check=True, timeout=60)
    for path, (text, append) in readme_files()[0].items():
        target = project / path
        target.write_text((target.read_text() + "\n" if append else "") + text)
    settings = project / "mysite" / "settings.py"
    settings.write_text(settings.read_text() + "\n" + guide_settings())

    def python(*args, **env):
        base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WORQR_"))}
        full = {**base, **example_env(), "PYTHONPATH": str(ROOT), **env}
        full["WORQR_REDIS_URL"] = os.environ["WORQR_REDIS_URL"]  # the test session's Redis
        return subprocess.run(
            [sys.executable, *args], cwd=project, env=full, capture_output=True, text=True, timeout=120
        )

    return project, python


def test_check_deploy_reports_nothing_with_the_guides_settings(guide_project):
    """A new project with the README's and the deploy guide's settings and worqr.env.example's variables (its ..."""
    # ... secret replaced by a real one) passes `check --deploy` with no warning: HSTS, SSL redirect, secure cookies.
    _, python = guide_project
    out = python(
        "manage.py", "check", "--deploy", "--fail-level", "WARNING", DJANGO_SECRET_KEY=secrets.token_urlsafe(50)
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "System check identified no issues (0 silenced)" in out.stdout


def test_the_guides_placeholder_secret_stops_every_process_at_start(guide_project):
    """worqr.env.example's placeholder key (as shipped), or any published key, stops manage.py at start with a ..."""
    # ... message saying what to do; the web process (Daphne, through the guide's asgi.py) refuses it too.
    _, python = guide_project
    assert example_env()["DJANGO_SECRET_KEY"] == "change-me-to-50-or-more-random-characters"
    for key in (None, "worqr-demo-insecure-change-me", "django-insecure-" + "x" * 50, "CHANGEME" + "y" * 50):
        out = python("manage.py", "check", **({"DJANGO_SECRET_KEY": key} if key else {}))
        assert out.returncode != 0 and "SECRET_KEY is a published key" in out.stderr, (key, out.stderr[-500:])
        assert "token_urlsafe(50)" in out.stderr
    web = python("-c", "import mysite.asgi")  # what Daphne imports: Django is set up there
    assert web.returncode != 0 and "SECRET_KEY is a published key" in web.stderr
    assert python("manage.py", "check", DJANGO_SECRET_KEY=secrets.token_urlsafe(50)).returncode == 0
