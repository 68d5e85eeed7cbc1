"""What a worker's log says about failed attempts: the exception and its message, the attempt out
of how many, when it runs again, and for a final failure the traceback."""

import json
import re

from queues import Queue
from tests.conftest import wait_for


def test_a_failed_attempt_names_the_error_the_attempt_and_the_retry(workers):
    """`attempt=1/4 retry_in=0.3s error="ValueError: ..."` (the handler's 3 retries, 0.3 s backoff)."""
    q = Queue("retries")
    task_id = q.enqueue('{"fail": 2}')
    w = workers(["retries"])
    wait_for(lambda: q.counts()["completed"] == 1, timeout=60, message="the task to complete on its 3rd attempt")
    wait_for(lambda: f"task {task_id} queue=retries outcome=completed" in w.output(), timeout=30, message="its line")
    out = w.output()
    first = re.search(rf"task {task_id} queue=retries outcome=failed duration=[0-9.]+ms (.*)", out)
    assert first, out
    assert first.group(1) == 'attempt=1/4 retry_in=0.3s error="ValueError: asked to fail on attempt 1"'
    second = re.search(
        rf"task {task_id} .* attempt=2/4 retry_in=(0\.[67])s error=\"ValueError: asked to fail on attempt 2\"", out
    )
    assert second, out
    assert "Traceback" not in out  # retried attempts log no traceback


def test_a_final_failure_logs_its_traceback_at_error(workers):
    """The last attempt's line says it is the last (`attempt=1/1`, no retry) and carries the traceback."""
    q = Queue("retries")
    task_id = q.enqueue('{"fail": "always"}', retries=0)
    w = workers(["retries"])
    wait_for(lambda: q.counts()["failed"] == 1, timeout=60, message="the task to fail")
    wait_for(lambda: "Traceback" in w.output(), timeout=30, message="the traceback in the worker's log")
    out = w.output()
    line = re.search(rf"task {task_id} queue=retries outcome=failed duration=[0-9.]+ms (.*)\n((?:.*\n)*)", out)
    assert line, out
    assert line.group(1) == 'attempt=1/1 error="ValueError: asked to fail on attempt 1"'
    trace = line.group(2)
    assert trace.startswith("Traceback (most recent call last):"), trace
    assert 'raise ValueError(f"asked to fail on attempt {task.attempt}")' in trace
    assert "ValueError: asked to fail on attempt 1" in trace


def test_a_json_log_line_carries_retry_in(workers):
    """With JSON logs, the retried attempt's object has `retry_in` (seconds) beside `attempt` and `error`."""
    q = Queue("retries")
    task_id = q.enqueue('{"fail": 1}')
    w = workers(["retries"], options=["--log-format", "json"])
    wait_for(lambda: q.counts()["completed"] == 1, timeout=60, message="the task to complete")
    wait_for(lambda: '"outcome": "completed"' in w.output(), timeout=30, message="its line")
    lines = [json.loads(x) for x in w.output().splitlines() if x.startswith("{")]
    (failed,) = [x for x in lines if x.get("task_id") == task_id and x.get("outcome") == "failed"]
    assert (failed["level"], failed["attempt"], failed["retry_in"]) == ("WARNING", 1, 0.3)
    assert failed["error"] == "ValueError: asked to fail on attempt 1"


def test_an_isolated_handlers_final_failure_logs_the_traceback_from_its_process(workers):
    """An isolated handler's final failure logs the traceback it raised in its process."""
    q = Queue("p1")
    task_id = q.enqueue('{"fail": "always"}')
    w = workers(["p1"], options=["--log-format", "json"])
    wait_for(lambda: q.counts()["failed"] == 1, timeout=60, message="the task to fail")
    wait_for(lambda: '"outcome": "failed"' in w.output(), timeout=30, message="its line")
    lines = [json.loads(x) for x in w.output().splitlines() if x.startswith("{")]
    (failed,) = [x for x in lines if x.get("task_id") == task_id and x.get("outcome") == "failed"]
    assert failed["level"] == "ERROR"
    assert "\n" not in failed["message"] and failed["message"].endswith(
        'attempt=1/1 error="ValueError: asked to fail on attempt 1"'
    )
    assert failed["traceback"].startswith("Traceback (most recent call last):")
    assert failed["traceback"].endswith("ValueError: asked to fail on attempt 1")


def test_retry_in_is_the_backoff_the_task_was_enqueued_with(workers):
    """A task's own `backoff=` (not its handler's 0.3 s) is what its line announces, and what it waits."""
    q = Queue("retries")
    task_id = q.enqueue('{"fail": 1}', backoff=1.5)
    w = workers(["retries"])
    wait_for(lambda: q.counts()["completed"] == 1, timeout=60, message="the task to complete on its 2nd attempt")
    wait_for(lambda: f"task {task_id} queue=retries outcome=completed" in w.output(), timeout=30, message="its line")
    line = re.search(rf"task {task_id} queue=retries outcome=failed duration=[0-9.]+ms (.*)", w.output())
    assert line and re.match(r"attempt=1/4 retry_in=1\.[56]s error=", line.group(1)), w.output()
