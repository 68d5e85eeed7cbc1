"""The chaos soak (manage.py chaos), short: about a minute of every kind of fault while tasks
are committed through the outbox and drained, and its figures hold: nothing lost with AOF
appendfsync always, nothing run that was never committed, no fault with more duplicates than
tasks in flight. ``WORQR_SOAK=1`` runs the long one (20,000 tasks, at least 50 faults)."""

import json
import os
import subprocess
import sys

import pytest

from chaos.run import FAULTS
from tests.conftest import ARTIFACTS, ROOT

pytestmark = pytest.mark.django_db(transaction=True)

SOAK = os.environ.get("WORQR_SOAK") == "1"


def test_short_chaos_run_loses_nothing_and_duplicates_only_in_flight_tasks(tmp_path):
    """Every fault kind strikes at least once while 1,500 tasks (20,000 in a soak) are committed and drained."""
    # the run's figures keep the guarantees.
    ARTIFACTS.mkdir(exist_ok=True)
    out = ARTIFACTS / "chaos.json"
    tasks, rate, faults = (20000, 150, 50) if SOAK else (2500, 50, 8)
    args = [
        sys.executable,
        str(ROOT / "manage.py"),
        "chaos",
        "--tasks",
        str(tasks),
        "--workers",
        "3",
        "--concurrency",
        "4",
        "--producers",
        "2",
        "--rate",
        str(rate),
        "--gap",
        "0.5,1.5",
        "--min-faults",
        str(faults),
        "--seed",
        "7",
        "--json",
        str(out),
        "--dir",
        str(tmp_path / "run"),
    ]
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings")
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800 if SOAK else 240)
    figures = json.loads(out.read_text())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert figures["ok"] and figures["committed"] == tasks == figures["completed"]
    assert figures["lost"] == 0 and figures["unknown"] == 0 and figures["left_in_outbox"] == 0
    assert figures["faults"] >= faults and set(figures["faults_by_kind"]) == set(FAULTS)
    assert figures["faults_with_more_duplicates_than_in_flight"] == 0 and figures["duplicates_unexplained"] == 0
    for f in figures["fault_log"]:
        assert f["duplicates"] <= f["in_flight"], f
    assert figures["longest_recovery_seconds"] is not None and figures["throughput_per_second"] > 0
