"""Stress: a global concurrency limit holds while workers are killed -9 and replaced."""

import json
import time

import pytest

from queues import Queue
from tests.conftest import records, wait_for, wait_registered
from tests.support.limits import overlap

pytestmark = pytest.mark.stress


def test_concurrency_holds_through_kill_9_and_replacements(client, workers):
    """concurrency=2 over four workers, two killed -9 mid-run and replaced."""
    # never more than 2 handlers run at once, and every task completes.
    started = [workers(["lim-conc"], concurrency=4, name=f"ls{i}") for i in range(4)]
    for i in range(4):
        wait_registered(client, f"ls{i}")
    n = 40
    Queue("lim-conc").enqueue_many([json.dumps({"sleep": 0.2, "n": i}) for i in range(n)])
    for victim, spare in ((started[0], "ls4"), (started[1], "ls5")):
        wait_for(lambda: Queue("lim-conc").limits()["active"] == 2, message="the limit in use")
        victim.kill()
        workers(["lim-conc"], concurrency=4, name=spare)
        time.sleep(0.5)  # let the run go on between the kills (not an assertion's wait)
    recs = wait_for(
        lambda: (r := records(client, "lim-conc")) and len({json.loads(x["payload"])["n"] for x in r}) == n and r,
        timeout=60,
        message="every task done",
    )
    assert overlap(recs) <= 2
    # a handler writes its record before its worker reports the end that frees its slot
    wait_for(lambda: Queue("lim-conc").limits()["active"] == 0, timeout=30, message="every slot given back")
