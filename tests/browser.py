"""Helpers for the dashboard's browser tests: a real Daphne serving the project, the system's
Chromium driven by Playwright (never a downloaded browser), and enqueueing from another process.
"""

import os
import signal
import subprocess
import sys
import time
import urllib.request

from queues.testing import free_port
from tests.conftest import ARTIFACTS, ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def subprocess_env():
    """The test session's environment (Redis URL, database file) with the test settings."""
    return dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings", PYTHONUNBUFFERED="1")


class DaphneServer:
    """``daphne worqr_site.asgi:application`` on a free port, its output kept in test-artifacts."""

    def __init__(self, port=None, env=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / f"daphne-{time.time_ns()}.log"
        self.log = open(self.log_path, "w")
        daphne = str(ROOT / ".venv" / "bin" / "daphne")
        if not os.path.exists(daphne):
            daphne = os.path.join(os.path.dirname(sys.executable), "daphne")
        self.proc = subprocess.Popen(
            [daphne, "-b", "127.0.0.1", "-p", str(self.port), "worqr_site.asgi:application"],
            cwd=ROOT,
            env={**subprocess_env(), **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited:\n{self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(self.url + "/admin/login/", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"daphne did not answer within {timeout} s:\n{self.log_path.read_text()}")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()


def enqueue_elsewhere(queue, *payloads, **options):
    """Enqueue through ``manage.py enqueue`` in another process; returns the task ids."""
    args = [sys.executable, str(ROOT / "manage.py"), "enqueue", queue, *payloads]
    for name, value in options.items():
        args += [f"--{name}", str(value)]
    out = subprocess.run(args, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
