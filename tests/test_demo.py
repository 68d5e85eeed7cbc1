"""`make demo` (scripts/demo.sh), run for real: the dashboard answers with a worker and the
embedded Redis, and Ctrl-C stops all of it, the embedded Redis too when the demo started it."""

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from queues import embedded
from queues.testing import free_port

from .conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def _run_demo(var, port):
    env = {
        k: v for k, v in os.environ.items() if k not in ("WORQR_REDIS_URL", "DJANGO_SETTINGS_MODULE", "WORQR_DB_PATH")
    }
    env.update(PY=sys.executable, PORT=str(port), WORQR_VAR_DIR=str(var))
    return subprocess.Popen(
        ["scripts/demo.sh"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _ctrl_c(proc):
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the foreground group
    try:
        out, _ = proc.communicate(timeout=60)  # the worker may finish a 10 s task first
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"the demo did not stop on Ctrl-C:\n{out}") from None
    return out


def _demo_worker_alive():
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return any("--name demo-worker" in line and "manage.py worker" in line for line in ps.splitlines())


def test_demo_serves_the_dashboard_and_ctrl_c_stops_it_and_its_redis(tmp_path):
    """`make demo`'s script with no Redis running."""
    # the dashboard answers, a worker and the embedded Redis run; Ctrl-C (SIGINT to the group) stops the worker and that
    # Redis.
    var, port = tmp_path / "var", free_port()
    proc = _run_demo(var, port)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/admin/login/"), 90, 0.3, "the demo's dashboard")
        assert embedded.running(var)
        worker_was_alive = _demo_worker_alive()
    finally:
        out = _ctrl_c(proc)
    assert worker_was_alive, out
    assert "worqr demo is running" in out and f"http://127.0.0.1:{port}/queues/" in out, out
    assert "Embedded Redis: stopped" in out, out
    assert not embedded.running(var)
    wait_for(lambda: not _demo_worker_alive(), 10, 0.2, "the demo's worker to stop")


def test_demo_leaves_an_embedded_redis_it_did_not_start_running(tmp_path):
    """An embedded Redis already running before the demo is still running after its Ctrl-C."""
    var, port = tmp_path / "var", free_port()
    embedded.ensure(var)
    try:
        proc = _run_demo(var, port)
        try:
            wait_for(lambda: _answers(f"http://127.0.0.1:{port}/admin/login/"), 90, 0.3, "the demo's dashboard")
        finally:
            out = _ctrl_c(proc)
        assert "Embedded Redis: stopped" not in out, out
        assert embedded.running(var)
    finally:
        embedded.stop(var)
