"""The Tasks framework (django.tasks / django-tasks) on worqr: WorqrBackend, end to end with real
worker processes running the functions of tests/tasksapp/tasks.py."""

import asyncio
import json
import os
import re
import subprocess
import sys
import types
from datetime import datetime, timedelta
from importlib.util import find_spec

import pytest
from django.test import override_settings
from django.utils import timezone

from queues import Queue
from queues.backends.framework import (
    InvalidTaskError,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)
from queues.engine import registry
from tests import conformance
from tests.conftest import ROOT, wait_for
from tests.tasksapp import tasks

try:
    from django.tasks.exceptions import TaskResultMismatch
except ImportError:
    from django_tasks.exceptions import TaskResultMismatch

QUEUES = ["dt-default", "dt-emails", "dt-retry"]


def finished(result, timeout=20.0):
    def done():
        result.refresh()
        return result.is_finished

    wait_for(done, timeout, interval=0.05, message=f"task {result.id} to finish")
    return result


def traces(client, name):
    return [json.loads(r) for r in client.lrange(f"test:dt:{name}", 0, -1)]


def test_enqueue_runs_on_a_worker_and_keeps_the_return_value(workers, client):
    """enqueue() gives a READY result with a worqr id."""
    # a worker runs it; refresh() and get_result() show SUCCESSFUL with the return value, timestamps and the worker.
    result = tasks.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    assert result.id.startswith("dt-default-") and result.backend == "default"
    assert result.args == [2, 3] and result.enqueued_at is not None
    assert Queue("dt-default").get(result.id).state == "pending"
    none = tasks.returns_none.enqueue()
    workers(QUEUES)
    finished(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"sum": 5, "args": [2, 3]}
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.attempts == 1 and result.worker_ids[0]
    again = tasks.add.get_result(result.id)
    assert again.return_value == {"sum": 5, "args": [2, 3]} and again.task.func is tasks.add.func
    assert task_backends["default"].get_result(result.id).status == TaskResultStatus.SUCCESSFUL
    (trace,) = traces(client, "add")
    assert trace["a"] == 2 and trace["pid"] != __import__("os").getpid()
    assert finished(none).status == TaskResultStatus.SUCCESSFUL and none.return_value is None


def test_failure_is_kept_with_the_error(workers):
    """An exception fails the task (no retries on this backend)."""
    # FAILED, with the exception's class and traceback; it sits in worqr's failed set like any failed task.
    result = tasks.fails.enqueue("boom")
    bad_value = tasks.returns_object.enqueue()
    workers(QUEUES)
    finished(result)
    assert result.status == TaskResultStatus.FAILED
    (error,) = result.errors
    assert error.exception_class is ValueError
    assert "ValueError: boom" in error.traceback and "tasksapp/tasks.py" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    assert result.finished_at is not None
    finished(bad_value)
    assert bad_value.status == TaskResultStatus.FAILED  # a return value that is not JSON
    assert bad_value.errors[0].exception_class is TypeError
    assert Queue("dt-default").get(result.id).state == "failed"
    assert Queue("dt-default").counts()["failed"] == 2


def test_run_after_defers_the_run(workers):
    """run_after maps to worqr's eta: the task is delayed and does not start before it."""
    workers(QUEUES)
    run_after = timezone.now() + timedelta(seconds=1.5)
    result = tasks.add.using(run_after=run_after).enqueue(1, 1)
    assert Queue("dt-default").get(result.id).state == "delayed"
    result.refresh()
    assert result.status == TaskResultStatus.READY and result.task.run_after == run_after
    finished(result)
    assert result.return_value["sum"] == 2
    assert result.started_at >= run_after - timedelta(milliseconds=50)


def test_async_task_function(workers):
    """An async def task runs on the worker and its return value is kept."""
    result = tasks.async_double.enqueue(21)
    workers(QUEUES)
    assert finished(result).return_value == 42


def test_takes_context_sees_the_attempt_number(workers, client):
    """A takes_context task gets TaskContext."""
    # its attempt is worqr's attempt, and failed attempts are retried with the backend's RETRIES, their errors listed on
    # the result.
    result = tasks.flaky.enqueue(3)
    workers(QUEUES)
    finished(result)
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 3
    assert [t["attempt"] for t in traces(client, "flaky")] == [1, 2, 3]
    assert {t["result_id"] for t in traces(client, "flaky")} == {result.id}
    assert result.attempts == 3
    assert [e.exception_class for e in result.errors] == [RuntimeError, RuntimeError]
    assert "attempt 2 fails" in result.errors[-1].traceback


async def test_aenqueue_and_arefresh(workers):
    """The async twins: aenqueue() and arefresh()/aget_result()."""
    workers(QUEUES)
    result = await tasks.add.aenqueue(4, 5)
    for _ in range(400):
        await result.arefresh()
        if result.is_finished:
            break
        await asyncio.sleep(0.05)
    assert result.return_value["sum"] == 9
    assert (await tasks.add.aget_result(result.id)).status == TaskResultStatus.SUCCESSFUL


def test_arguments_that_are_not_json_are_refused_at_enqueue(client):
    """The framework's own error (TaskResult's normalisation) refuses the call; nothing is added."""
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.add.enqueue(object(), 1)
    with pytest.raises(ValueError, match="Unsupported value"):
        tasks.add.enqueue(b"\xff", 1)
    assert Queue("dt-default").counts()["enqueued"] == 0


def test_tuples_and_bytes_arrive_as_json(workers):
    """Arguments are normalised like the framework does (tuples to lists, UTF-8 bytes to str)."""
    result = tasks.add.enqueue((1,), (2,))
    assert result.args == [[1], [2]]
    workers(QUEUES)
    assert finished(result).return_value == {"sum": [1, 2], "args": [[1], [2]]}


def test_priority_is_accepted_validated_and_kept():
    """priority is accepted (within -100..100) and kept with the task; queues stay FIFO."""
    assert tasks.send_welcome.priority == 10
    result = tasks.send_welcome.enqueue(42)
    assert tasks.send_welcome.get_result(result.id).task.priority == 10
    assert json.loads(Queue("dt-emails").get(result.id).payload)["priority"] == 10
    with pytest.raises(InvalidTaskError):
        tasks.send_welcome.using(priority=101)


def test_queue_must_be_one_of_the_backend(client):
    """A queue not in the backend's QUEUES is refused by the framework's validation."""
    with pytest.raises(InvalidTaskError):
        tasks.add.using(queue_name="dt-elsewhere")


def test_unknown_and_foreign_ids_do_not_exist():
    """get_result raises TaskResultDoesNotExist for unknown ids, ids of other queues, and worqr tasks that were ..."""
    # ... not enqueued through the framework; a result of another task mismatches.
    backend = task_backends["default"]
    plain = Queue("dt-default").enqueue("not a framework call")
    for bad in ("nope", "dt-default-0123456789abcdef", "t1-0123456789abcdef", plain):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(bad)
    other = tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultMismatch):
        tasks.fails.get_result(other.id)


def test_cancel_like_any_worqr_task():
    """A framework task is an ordinary worqr task: cancelling it removes it (and its result)."""
    result = tasks.add.using(run_after=timezone.now() + timedelta(minutes=5)).enqueue(1, 2)
    assert Queue("dt-default").cancel(result.id) is True
    with pytest.raises(TaskResultDoesNotExist):
        result.refresh()


def test_task_enqueued_signal():
    """The framework's task_enqueued signal is sent with the result."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        result = tasks.add.enqueue(1, 2)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [result.id]


def test_exception_class_paths_from_worqr_errors():
    """The class of a failure is read from the traceback's last line."""
    # worqr's own errors (a timeout, a lost worker) map to real classes.
    from queues.backends.dispatch import exception_path

    chained = (
        "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'k'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "b.py", line 2\n    x()\n'
        "myapp.errors.Oops: bad\n"
    )
    assert exception_path("Oops: bad", chained) == "myapp.errors.Oops"
    assert exception_path("TaskTimeout: ran longer than its timeout of 1 s", "") == "builtins.TimeoutError"
    assert exception_path("WorkerLost: gone", "") == "queues.engine.errors.WorkerLost"
    assert exception_path("ValueError: x", "") == "builtins.ValueError"
    assert exception_path("who knows", "") == "builtins.Exception"


def test_a_queue_with_its_own_handler_cannot_be_a_tasks_queue():
    """A backend queue whose name already has a worqr handler is a configuration error."""
    from django.core.exceptions import ImproperlyConfigured

    from queues.backends import WorqrBackend

    with pytest.raises(ImproperlyConfigured, match="already has a handler"):
        WorqrBackend("clash", {"QUEUES": ["t1"]})
    with pytest.raises(ImproperlyConfigured, match="queue name"):
        WorqrBackend("bad", {"QUEUES": ["no spaces"]})


def test_a_backend_made_directly_reads_back_its_results(workers):
    """A WorqrBackend made directly (an alias TASKS doesn't name) reads its results back, READY then SUCCESSFUL, ..."""
    # ... instead of failing on the unknown alias.
    from queues.backends import WorqrBackend

    backend = WorqrBackend("direct", {"QUEUES": ["dt-default"]})
    result = backend.enqueue(tasks.add, [4, 5], {})
    got = backend.get_result(result.id)
    assert (got.status, got.args, got.backend) == (TaskResultStatus.READY, [4, 5], "direct")
    assert got.task.func is tasks.add.func and got.task.queue_name == "dt-default"
    workers(["dt-default"])
    wait_for(lambda: backend.get_result(result.id).is_finished, 20, message="the task to finish")
    assert backend.get_result(result.id).return_value == {"sum": 9, "args": [4, 5]}


def test_a_naive_run_after_without_use_tz_is_local_time(settings):
    """USE_TZ = False: a naive run_after is read in TIME_ZONE (not UTC), and the result's times are naive local ..."""
    # ... times like Django's own.
    from zoneinfo import ZoneInfo

    settings.USE_TZ, settings.TIME_ZONE = False, "America/New_York"
    zone = ZoneInfo("America/New_York")
    run_after = datetime.now(zone).replace(tzinfo=None) + timedelta(minutes=10)
    result = tasks.add.using(run_after=run_after).enqueue(1, 1)
    wtask = Queue("dt-default").get(result.id)
    assert wtask.state == "delayed"
    assert abs(wtask.due_at - run_after.replace(tzinfo=zone)) < timedelta(seconds=1)
    got = tasks.add.get_result(result.id)
    assert got.task.run_after == run_after
    for when in (result.enqueued_at, got.enqueued_at):
        assert when.tzinfo is None
        assert abs(when - datetime.now(zone).replace(tzinfo=None)) < timedelta(seconds=30)


def test_a_5_mb_return_value_comes_back_whole(workers):
    """Return values of 5 MB (sync and async functions)."""
    # their acknowledgements, each one call far over the connection's write buffer, reach Redis whole, and the results
    # read them back.
    size = 5 * 1024 * 1024
    results = [tasks.big_result.enqueue(size), tasks.big_result_async.enqueue(size), tasks.add.enqueue(1, 2)]
    workers(QUEUES, concurrency=2)
    for result in results:
        finished(result, timeout=60)
    assert [r.status for r in results] == [TaskResultStatus.SUCCESSFUL] * 3
    assert results[0].return_value == "r" * size and results[1].return_value == "a" * size
    assert results[2].return_value == {"sum": 3, "args": [1, 2]}


@pytest.mark.skipif(find_spec("django.tasks") is not None, reason="Django 6 has the framework built in")
def test_on_django_52_without_the_backport_the_error_says_what_to_install():
    """On Django 5.2 with no django-tasks, importing the backend fails naming pip install 'worqr[django52]'."""
    hide = "import sys; sys.modules['django_tasks'] = None; import queues.backends"  # as if not installed
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings")
    done = subprocess.run([sys.executable, "-c", hide], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: worqr's Tasks backend needs Django 6 (django.tasks) or, on Django 5.2, the django-tasks "
        "backport: pip install 'worqr[django52]'"
    )


def test_the_readme_s_first_example_runs_as_written(monkeypatch):
    """README's @task example (its task, TASKS and calls) enqueues, runs on a worker and gives the result it shows."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API") :]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)[:3]
    module_src, settings_src, calls_src = blocks
    assert module_src.startswith("# jobs/tasks.py\n") and settings_src.startswith("# mysite/settings.py\n")
    if not find_spec("django.tasks"):  # Django 5.2: the backport, as the example's comment says
        module_src = module_src.replace("from django.tasks import task", "from django_tasks import task")
    monkeypatch.setattr(registry, "_handlers", dict(registry._handlers))  # the backend registers "welcome"
    for name in ("jobs", "jobs.tasks"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules["jobs"].__path__ = []
    jobs = {}
    exec(settings_src, jobs)
    with override_settings(TASKS=jobs["TASKS"]):
        exec(compile(module_src, "README:jobs/tasks.py", "exec"), sys.modules["jobs.tasks"].__dict__)
        sys.modules["jobs"].tasks = sys.modules["jobs.tasks"]
        scope = {}
        for line in calls_src.splitlines():
            if line.startswith("await "):
                continue  # from async code: the sync lines are run here
            if line.startswith("result.refresh()"):  # by then a worker has run it
                assert scope["result"].id.startswith("welcome-")
                conformance.drain(task_backends["default"])
            exec(line, scope)
        result = scope["result"]
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.return_value == {"user": 42, "template": "short"}  # as the README's comment says
        assert Queue("welcome").counts()["delayed"] == 1  # the one enqueued for later
        assert '# {"user": 42, "template": "short"} once SUCCESSFUL' in calls_src
