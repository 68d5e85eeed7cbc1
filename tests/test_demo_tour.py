"""What a newcomer sees in `make demo` (scripts/demo.sh, sample/): the address and the password
come last, after the worker's start-up lines, and every page of the dashboard has something on it
(a long task with progress and log lines, a failing one with retries, schedules, a batch, delayed
tasks), still moving while one looks."""

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import redis

from queues.engine import keys, readmodel
from queues.testing import free_port

from .conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def _completed(client, queue):
    return int(client.hget(keys.queue_key(queue, "stats"), "completed") or 0)


def test_demo_prints_its_address_last_and_fills_every_page(tmp_path):
    """A run of the demo, read through its embedded Redis, then Ctrl-C."""
    var, port = tmp_path / "var", free_port()
    env = {
        k: v for k, v in os.environ.items() if k not in ("WORQR_REDIS_URL", "DJANGO_SETTINGS_MODULE", "WORQR_DB_PATH")
    }
    env.update(PY=sys.executable, PORT=str(port), WORQR_VAR_DIR=str(var))
    proc = subprocess.Popen(
        ["scripts/demo.sh"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/admin/login/"), 120, 0.3, "the demo's dashboard")
        client = redis.Redis(unix_socket_path=str(var / "redis.sock"))
        # a long task with progress and log lines, while it runs
        running = wait_for(
            lambda: [t for t in readmodel.active(client, "reports") if (t.progress_value or 0) > 0],
            60,
            0.2,
            "a report in progress",
        )
        assert wait_for(lambda: readmodel.task_log(client, running[0].id), 30, 0.2, "its log lines")

        # a failing task, retried, then failed for good (3 retries: about 15 s of backoff). A
        # bounced address fails every attempt; any other mail fails 1 attempt in 5 at random, so
        # one may run out of attempts too (4 in a row): the bounce is looked for among them.
        def bounced():
            return [f for f in readmodel.failed(client, "emails") if "550 mailbox unavailable" in (f.error or "")]

        (failed, *_) = wait_for(bounced, 120, 0.5, "a bounced mail failed for good")
        assert failed.attempt == 4
        assert client.zcard(keys.queue_key("notifications", "delayed")) >= 1  # delayed reminders
        assert set(readmodel.schedule_index(client)) == {"ping", "nightly-report"}
        _, count = readmodel.batches(client)
        assert count >= 1
        # still moving: more tasks complete, with nothing enqueued from here
        before = sum(_completed(client, q) for q in ("default", "notifications"))
        wait_for(
            lambda: sum(_completed(client, q) for q in ("default", "notifications")) >= before + 4,
            60,
            0.5,
            "the trickle's tasks to complete",
        )
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise AssertionError(f"the demo did not stop on Ctrl-C:\n{out}") from None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    lines = lines[: lines.index("Embedded Redis: stopped")] if "Embedded Redis: stopped" in lines else lines
    assert lines[-1] == "Stop with Ctrl-C.", out  # the message is the last thing printed ...
    message = lines.index("worqr demo is running.")
    assert lines[message + 1] == f"Dashboard:  http://127.0.0.1:{port}/queues/", out
    assert lines[message + 2].startswith("Log in as:  demo / "), out
    serving = next(i for i, line in enumerate(lines) if "worker demo-worker serving" in line)
    assert serving < message, out  # ... after the worker's start-up lines
