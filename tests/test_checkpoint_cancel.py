"""A cancel stops an async generator handler (checkpoints) at its next yield, in a real worker
process: the step under way is finished, none begins after it, and the task ends cancelled."""

import json

from queues import Queue
from tests.conftest import wait_for


def test_a_cancel_stops_an_async_generator_at_its_next_yield_not_midway(client, workers):
    """Steps of 0.4 s; cancelled during one: it ends (no step is cut off), no later step begins, the task is cancelled."""
    q = Queue("ck-async-marked")
    log = "test:ck-marked"
    task_id = q.enqueue(json.dumps({"n": 100, "sleep": 0.4, "log": log}))
    workers(["ck-async-marked"])
    wait_for(lambda: client.llen(log) >= 6, timeout=30, message="three steps")  # b0 e0 b1 e1 b2 e2
    wait_for(lambda: client.lindex(log, -1).startswith(b"b "), timeout=10, message="a step under way")
    assert q.cancel(task_id) is True
    wait_for(lambda: q.counts()["cancelled"] == 1, timeout=30, message="the task to end cancelled")
    marks = [m.decode().split() for m in client.lrange(log, 0, -1)]
    begun = [int(i) for kind, i in marks if kind == "b"]
    ended = [int(i) for kind, i in marks if kind == "e"]
    assert begun == ended == list(range(len(begun))), marks  # every step begun was finished
    assert q.counts()["completed"] == 0 and len(begun) < 100
