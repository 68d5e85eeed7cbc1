"""`make demo` (scripts/demo.sh), run for real: the dashboard answers with a worker and the
embedded Redis, and Ctrl-C stops all of it, the embedded Redis too when the demo started it."""

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from queues import embedded
from queues.testing import free_port

from .conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent

#: The demo's start-up may take minutes on a loaded machine: its waits, not the suite's 180 s, bound it.
pytestmark = pytest.mark.timeout(900)


def _answers(url, timeout=1):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def _run_demo(var, port):
    """The demo in a session of its own (its id is the script's pid), its output in var/demo.out."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("WORQR_REDIS_URL", "DJANGO_SETTINGS_MODULE", "WORQR_DB_PATH")
    }
    env.update(PY=sys.executable, PORT=str(port), WORQR_VAR_DIR=str(var))
    var.mkdir(parents=True, exist_ok=True)
    with open(var / "demo.out", "w") as out:  # a file, not a pipe: nothing blocks on a full pipe
        proc = subprocess.Popen(
            ["scripts/demo.sh"], cwd=ROOT, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT
        )
    proc.output = lambda: (var / "demo.out").read_text()
    return proc


def _wait_started(proc, port):
    """Until the demo prints its address, which must then answer at once; an exit of the demo
    fails at once, with its output. The start-up (migrate, collectstatic, a worker, five enqueue
    commands) is slow on a loaded machine, so the bound is generous: the demo's exit is the
    signal that it will not start."""
    url = f"http://127.0.0.1:{port}/admin/login/"
    wait_for(lambda: proc.poll() is not None or "Dashboard:" in proc.output(), 600, 0.1, "the demo's address")
    assert proc.poll() is None, f"the demo exited ({proc.returncode}):\n{proc.output()}"
    # (the first request imports the dashboard: slow on a loaded machine, but no refusal)
    assert _answers(url, timeout=60), f"the demo printed its address before its dashboard answered:\n{proc.output()}"


def _ctrl_c(proc):
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the foreground group
    try:
        proc.wait(timeout=120)  # the worker may finish a 10 s task first
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"the demo did not stop on Ctrl-C:\n{proc.output()}") from None
    return proc.output()


def _demo_worker_alive(proc):
    """The demo's own worker runs: a process of the demo's session (not any demo on the machine)."""
    ps = subprocess.run(["ps", "-ww", "-eo", "sid=,args="], capture_output=True, text=True).stdout
    for line in ps.splitlines():
        sid, _, args = line.strip().partition(" ")
        if sid == str(proc.pid) and "--name demo-worker" in args and "manage.py worker" in args:
            return True
    return False


def test_demo_serves_the_dashboard_and_ctrl_c_stops_it_and_its_redis(tmp_path):
    """`make demo`'s script with no Redis running."""
    # the dashboard answers, a worker and the embedded Redis run; Ctrl-C (SIGINT to the group) stops the worker and that
    # Redis.
    var, port = tmp_path / "var", free_port()
    proc = _run_demo(var, port)
    try:
        _wait_started(proc, port)
        assert embedded.running(var)
        worker_was_alive = _demo_worker_alive(proc)
    finally:
        out = _ctrl_c(proc)
    assert worker_was_alive, out
    assert "worqr demo is running" in out and f"http://127.0.0.1:{port}/queues/" in out, out
    assert "Embedded Redis: stopped" in out, out
    assert not embedded.running(var)
    wait_for(lambda: not _demo_worker_alive(proc), 10, 0.2, "the demo's worker to stop")


def test_demo_leaves_an_embedded_redis_it_did_not_start_running(tmp_path):
    """An embedded Redis already running before the demo is still running after its Ctrl-C."""
    var, port = tmp_path / "var", free_port()
    embedded.ensure(var)
    try:
        proc = _run_demo(var, port)
        try:
            _wait_started(proc, port)
        finally:
            out = _ctrl_c(proc)
        assert "Embedded Redis: stopped" not in out, out
        assert embedded.running(var)
    finally:
        embedded.stop(var)
