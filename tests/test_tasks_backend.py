"""The Tasks framework (django.tasks / django-tasks) on worqr: WorqrBackend, end to end with real
worker processes running the functions of tests/tasksapp/tasks.py.

The second half is the framework's backend contract, checked against WorqrBackend: django-tasks
checks its own backends for what a caller relies on (enqueue, results and their refresh, statuses,
errors, run_after, priorities, takes_context, async functions, signals, and the errors bad input
gets). These are those checks, written for worqr and run with real worker processes wherever a task
must run. Where worqr deliberately answers differently, the test checks worqr's answer, and the
Tasks backend page (docs/tasks-backend.md) lists the difference.
"""

import asyncio
import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import types
import uuid
from datetime import datetime, timedelta
from importlib.util import find_spec

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from queues import Queue
from queues.backends import WorqrBackend
from queues.backends.framework import (
    LOGGER_NAME,
    InvalidTaskError,
    TaskResult,
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


# == the framework's backend contract ============================================================
def backend():
    return task_backends["default"]


def fields(result):
    """Every field of a TaskResult (what ``==`` compares), by name, so a mismatch names it."""
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(TaskResult)}


def wait_finished(result_id, timeout=20.0):
    """The result once it is finished, read afresh (the caller's result is left as it is)."""

    def done():
        found = backend().get_result(result_id)
        return found if found.is_finished else None

    return wait_for(done, timeout, interval=0.05, message=f"task {result_id} to finish")


@pytest.fixture
def enqueued_signals():
    """(sender, result) of every task_enqueued signal sent while the test runs."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result))

    task_enqueued.connect(receiver, dispatch_uid="test_tasks_backend")
    yield seen
    task_enqueued.disconnect(dispatch_uid="test_tasks_backend")


# -- the backend -----------------------------------------------------------------------------


def test_the_backend_is_made_from_settings():
    """TASKS["default"] is a WorqrBackend with its alias, queues and options; its checks pass."""
    assert isinstance(backend(), WorqrBackend)
    assert backend().alias == "default" and backend().options == {}
    assert backend().queues == {"dt-default", "dt-emails"}
    assert list(backend().check()) == []
    assert backend().supports_defer and backend().supports_async_task
    assert backend().supports_get_result and backend().supports_priority


# -- enqueue ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task", [tasks.noop, tasks.noop_async], ids=["sync", "async"])
def test_enqueue_returns_a_ready_result(task, enqueued_signals):
    """enqueue() answers READY, unstarted, with the normalised call and no attempts, and sends task_enqueued ..."""
    # ... with that very result.
    result = task.enqueue(1, two=3)
    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert result.started_at is None and result.last_attempted_at is None and result.finished_at is None
    with pytest.raises(ValueError, match="Task has not finished yet"):
        _ = result.return_value
    assert result.task == task and result.args == [1] and result.kwargs == {"two": 3}
    assert result.attempts == 0 and result.errors == [] and result.backend == "default"
    assert result.id.startswith("dt-default-") and result.enqueued_at is not None
    assert enqueued_signals == [(WorqrBackend, result)] and enqueued_signals[0][1] is result


@pytest.mark.parametrize("task", [tasks.noop, tasks.noop_async], ids=["sync", "async"])
async def test_aenqueue_returns_a_ready_result(task, enqueued_signals):
    """aenqueue() answers like enqueue()."""
    result = await task.aenqueue()
    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert result.started_at is None and result.finished_at is None and result.attempts == 0
    with pytest.raises(ValueError, match="Task has not finished yet"):
        _ = result.return_value
    assert result.task == task and result.args == [] and result.kwargs == {}
    assert enqueued_signals == [(WorqrBackend, result)]


CALLS = {
    "plain": lambda: backend().enqueue(tasks.noop, [], {}),
    "args": lambda: tasks.noop.enqueue(1, [2, (3,)], two={"x": None}),
    "async": lambda: tasks.noop_async.enqueue(),
    "context": lambda: tasks.own_id.enqueue(),
    "priority": lambda: tasks.send_welcome.enqueue(7),
    "run_after": lambda: tasks.noop.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(),
}


@pytest.mark.parametrize("call", list(CALLS.values()), ids=list(CALLS))
def test_the_result_of_enqueue_is_what_get_result_reads(call):
    """The result enqueue() returns equals, field by field (enqueued_at included."""
    # Redis's time), what get_result() reads back at once, through the backend and through the task.
    result = call()
    read = backend().get_result(result.id)
    assert fields(read) == fields(result)
    assert read == result
    assert result.task.get_result(result.id) == result


async def test_the_result_of_aenqueue_is_what_aget_result_reads():
    """The async twins agree the same way."""
    result = await backend().aenqueue(tasks.noop, [], {})
    assert fields(await backend().aget_result(result.id)) == fields(result)
    assert await tasks.noop.aget_result(result.id) == result


async def test_refreshing_a_ready_result_changes_nothing():
    """refresh() and arefresh() of a result nobody ran leave every field as enqueue() gave it."""
    result = await tasks.noop.aenqueue()
    before = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == before
    await result.arefresh()
    assert dataclasses.asdict(result) == before


def test_a_result_read_in_another_thread_is_the_same():
    """Another thread (with its own backend instance, as another request has) reads the same result."""
    result = tasks.noop.enqueue(5)
    seen = {}
    reader = threading.Thread(target=lambda: seen.update(result=task_backends["default"].get_result(result.id)))
    reader.start()
    reader.join(10)
    assert fields(seen["result"]) == fields(result)


def test_enqueue_is_logged(caplog):
    """The framework logs one "enqueued" line naming the result's id (from task_enqueued)."""
    with caplog.at_level("DEBUG", logger=LOGGER_NAME):  # django.tasks on Django 6, django_tasks on the backport
        result = tasks.noop.enqueue()
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]
    assert len(lines) == 1 and "enqueued" in lines[0] and result.id in lines[0]


# -- enqueue inside a transaction (worqr waits for the commit; upstream's backends do not) ----


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_result_exists_from_the_commit(enqueued_signals):
    """With ON_COMMIT (the default) the task is added at commit."""
    # until then enqueued_at is None, get_result() raises TaskResultDoesNotExist and task_enqueued is not sent; from the
    # commit the result has Redis's enqueue time and equals what get_result() reads.
    with transaction.atomic():
        result = tasks.noop.enqueue(1)
        assert result.enqueued_at is None and result.status == TaskResultStatus.READY
        with pytest.raises(TaskResultDoesNotExist):
            backend().get_result(result.id)
        assert enqueued_signals == []
    assert result.enqueued_at is not None
    assert fields(backend().get_result(result.id)) == fields(result)
    assert enqueued_signals == [(WorqrBackend, result)]


@pytest.mark.django_db(transaction=True)
def test_without_on_commit_the_result_exists_inside_the_transaction():
    """With ON_COMMIT False the task is added at the call, transaction or not, and its result is already what ..."""
    # ... get_result() reads.
    with override_settings(
        TASKS={
            "default": {
                "BACKEND": "queues.backends.WorqrBackend",
                "QUEUES": ["dt-default"],
                "OPTIONS": {"ON_COMMIT": False},
            }
        }
    ):
        with transaction.atomic():
            result = tasks.noop.enqueue()
            assert result.enqueued_at is not None
            assert fields(backend().get_result(result.id)) == fields(result)
            assert Queue("dt-default").get(result.id).state == "pending"


# -- running ---------------------------------------------------------------------------------


def test_refresh_shows_the_run(workers):
    """A result is a snapshot."""
    # after a worker ran the task it still says READY until refresh(), which shows SUCCESSFUL with the return value, one
    # attempt, and ordered times (enqueued_at unchanged). An async function runs the same way.
    result = tasks.meaning_of_life.enqueue()
    async_result = tasks.noop_async.enqueue()
    enqueued_at = result.enqueued_at
    workers(QUEUES)
    wait_finished(result.id)
    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert result.started_at is None and result.finished_at is None and result.attempts == 0
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.return_value == 42 and result.attempts == 1 and result.errors == []
    assert result.enqueued_at == enqueued_at
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at
    assert wait_finished(async_result.id).status == TaskResultStatus.SUCCESSFUL
    async_result.refresh()
    assert async_result.return_value is None


async def test_arefresh_shows_the_run(workers):
    """The async twins: aenqueue(), then arefresh() once a worker ran it."""
    result = await tasks.meaning_of_life.aenqueue()
    workers(QUEUES)
    wait_finished(result.id)
    assert result.status == TaskResultStatus.READY
    await result.arefresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 42
    assert result.attempts == 1 and result.started_at is not None and result.finished_at is not None


FAILURES = [  # (task, args, exception class, the traceback's last line)
    (tasks.fails, ["This task failed"], ValueError, "ValueError: This task failed"),
    (tasks.escapes, ["SystemExit"], SystemExit, "SystemExit: SystemExit from a task"),
    (tasks.escapes, ["KeyboardInterrupt"], KeyboardInterrupt, "KeyboardInterrupt: KeyboardInterrupt from a task"),
    (tasks.calls_exit, [], SystemExit, "SystemExit: 1"),
    (tasks.nested_exception, [], ValueError, "ValueError: the inner error"),
    (tasks.returns_object, [], TypeError, "TypeError: Unsupported type: <class 'object'>"),
]


def test_a_task_that_raises_fails_and_the_worker_goes_on(workers):
    """Whatever a function raises (an Exception, SystemExit, KeyboardInterrupt, exit(), or a return value that ..."""
    # ... is not JSON) fails its task: FAILED, the class and traceback kept, no return value, one attempt; the worker
    # survives and runs the next task.
    results = [task.enqueue(*args) for task, args, _, _ in FAILURES]
    after = tasks.meaning_of_life.enqueue()
    workers(QUEUES)
    for result, (task, args, exc_class, last_line) in zip(results, FAILURES, strict=True):
        result = wait_finished(result.id)
        assert result.status == TaskResultStatus.FAILED and result.is_finished, task.name
        with pytest.raises(ValueError, match="Task failed"):
            _ = result.return_value
        assert result._return_value is None
        assert result.started_at is not None and result.last_attempted_at is not None
        assert result.enqueued_at <= result.started_at <= result.finished_at
        (error,) = result.errors
        assert error.exception_class is exc_class, task.name
        assert error.traceback.endswith(last_line + "\n"), error.traceback
        assert result.task == task and result.args == args and result.kwargs == {}
        assert result.attempts == 1
    nested = backend().get_result(results[4].id)
    assert 'raise ValueError(ValueError("the inner error"))' in nested.errors[0].traceback
    assert wait_finished(after.id).return_value == 42


def test_takes_context(workers):
    """A takes_context function gets the TaskContext first."""
    # its result's id, status RUNNING, the call's arguments, and attempt 1 on the first run.
    own = tasks.own_id.enqueue()
    seen = tasks.context_of.enqueue()
    workers(QUEUES)
    assert wait_finished(own.id).return_value == own.id
    assert wait_finished(seen.id).return_value == {
        "is_context": True,
        "attempt": 1,
        "id": seen.id,
        "status": "RUNNING",
        "args": [],
    }


def test_task_started_and_task_finished_are_sent_in_the_worker(workers, client):
    """The worker sends task_started (RUNNING) then task_finished (SUCCESSFUL or FAILED) with the backend's ..."""
    # ... class, and their times are Redis's, as get_result() shows them.
    good = tasks.meaning_of_life.enqueue()
    bad = tasks.fails.enqueue("no")
    workers(QUEUES)
    good_read, bad_read = wait_finished(good.id), wait_finished(bad.id)
    assert good_read.status == TaskResultStatus.SUCCESSFUL and bad_read.status == TaskResultStatus.FAILED
    sent = traces(client, "signals")
    assert [(s["id"], s["status"]) for s in sent] == [
        (good.id, "RUNNING"),
        (good.id, "SUCCESSFUL"),
        (bad.id, "RUNNING"),
        (bad.id, "FAILED"),
    ]
    assert {s["sender"] for s in sent} == {"WorqrBackend"}
    assert os.getpid() not in {s["pid"] for s in sent}
    started, finished = sent[0], sent[1]
    assert started["enqueued_at"] == finished["enqueued_at"] == good_read.enqueued_at.isoformat()
    assert started["started_at"] == finished["started_at"] == good_read.started_at.isoformat()
    assert started["finished_at"] is None
    assert good_read.started_at <= datetime.fromisoformat(finished["finished_at"]) <= good_read.finished_at


def test_a_task_whose_worker_dies_runs_again_elsewhere(workers, client):
    """A worker killed (kill -9) mid-task."""
    # its result shows RUNNING until worqr presumes the worker dead, then another worker runs it again (attempt 2) to
    # SUCCESSFUL, where upstream's database worker leaves it RUNNING.
    result = tasks.slow_first_time.enqueue()
    first = workers(["dt-default"])
    wait_for(lambda: traces(client, "slow_first_time"), 20, message="the first attempt to start")
    assert backend().get_result(result.id).status == TaskResultStatus.RUNNING
    first.kill()
    workers(["dt-default"])
    done = wait_finished(result.id, timeout=30)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == 2
    assert done.attempts == 2 and done.enqueued_at == result.enqueued_at
    assert [t["attempt"] for t in traces(client, "slow_first_time")] == [1, 2]


def test_run_after_waits_while_later_tasks_run(workers):
    """A task whose run_after is in the future stays READY, unstarted, while a task enqueued after it runs."""
    # it keeps its run_after.
    run_after = timezone.now() + timedelta(hours=1)
    deferred = tasks.noop.using(run_after=run_after).enqueue()
    now = tasks.meaning_of_life.enqueue()
    workers(QUEUES)
    wait_finished(now.id)
    deferred.refresh()
    assert deferred.status == TaskResultStatus.READY and deferred.started_at is None
    assert deferred.attempts == 0 and deferred.task.run_after == run_after
    assert Queue("dt-default").get(deferred.id).state == "delayed"


def test_priority_is_kept_but_a_queue_runs_in_order(workers, client):
    """priority is kept with each task, but one queue runs first in, first out (worqr's priorities are between ..."""
    # ... queues), where upstream's database backend runs the highest first.
    low = tasks.add.using(priority=-10).enqueue(1, 0)
    high = tasks.add.using(priority=50).enqueue(2, 0)
    plain = tasks.add.enqueue(3, 0)
    assert [backend().get_result(r.id).task.priority for r in (low, high, plain)] == [-10, 50, 0]
    workers(QUEUES)
    for result in (low, high, plain):
        wait_finished(result.id)
    assert [t["a"] for t in traces(client, "add")] == [1, 2, 3]


def test_a_worker_runs_only_the_queues_it_serves(workers):
    """Each framework queue is its own worqr queue."""
    # a worker of dt-emails runs send_welcome and leaves the dt-default task READY, until a worker of dt-default runs
    # it.
    welcome = tasks.send_welcome.enqueue(1)
    other = tasks.meaning_of_life.enqueue()
    assert Queue("dt-emails").counts()["enqueued"] == Queue("dt-default").counts()["enqueued"] == 1
    workers(["dt-emails"])
    assert wait_finished(welcome.id).return_value == "welcome 1"
    other.refresh()
    assert other.status == TaskResultStatus.READY and other.attempts == 0
    workers(["dt-default"])
    assert wait_finished(other.id).return_value == 42


def test_two_workers_run_each_task_once(workers, client):
    """Tasks shared by two workers each run exactly once, all SUCCESSFUL."""
    results = [tasks.sleeps.enqueue(0.1) for _ in range(8)]
    pids = {workers(["dt-default"]).pid, workers(["dt-default"]).pid}
    for result in results:
        done = wait_finished(result.id)
        assert done.status == TaskResultStatus.SUCCESSFUL and done.attempts == 1
        assert done.return_value in pids
    runs = [s["id"] for s in traces(client, "signals") if s["status"] == "RUNNING"]
    assert sorted(runs) == sorted(r.id for r in results)


# -- reading results -------------------------------------------------------------------------


async def test_unknown_ids_do_not_exist():
    """get_result()/aget_result() of an id that names no task raise TaskResultDoesNotExist."""
    for bad in (str(uuid.uuid4()), "123", "dt-default-0123456789abcdef", "dt-elsewhere-0123456789abcdef"):
        with pytest.raises(TaskResultDoesNotExist):
            backend().get_result(bad)
        with pytest.raises(TaskResultDoesNotExist):
            await backend().aget_result(bad)


async def test_the_result_of_another_task_mismatches():
    """Task.get_result()/aget_result() of another task's id raise TaskResultMismatch."""
    result = await backend().aenqueue(tasks.noop_async, [], {})
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        tasks.noop.get_result(result.id)
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        await tasks.noop.aget_result(result.id)


def _framework_payload(path):
    return json.dumps(
        {
            "worqr_task": 1,
            "path": path,
            "args": [["exit", "1"]],
            "kwargs": {},
            "context": False,
            "priority": 0,
            "queue": "dt-default",
            "backend": "default",
            "run_after": None,
        }
    )


def test_a_task_path_that_is_not_a_task_does_not_exist(workers):
    """A framework payload whose path is not a Task (subprocess.check_output) or cannot be imported."""
    # get_result() raises TaskResultDoesNotExist (upstream raises SuspiciousOperation or ImportError), and a worker
    # fails the task, which worqr keeps in its failed set.
    q = Queue("dt-default")
    not_a_task = q.enqueue(_framework_payload("subprocess.check_output"))
    missing = q.enqueue(_framework_payload("tests.tasksapp.tasks.no_such_task"))
    no_module = q.enqueue(_framework_payload("missing.func"))
    for task_id in (not_a_task, missing, no_module):
        with pytest.raises(TaskResultDoesNotExist, match=task_id):
            backend().get_result(task_id)
    workers(QUEUES)
    for task_id, error in ((not_a_task, "TypeError"), (missing, "ImportError"), (no_module, "ModuleNotFoundError")):
        failed = wait_for(
            lambda t=task_id: q.get(t) if q.get(t).state == "failed" else None, 20, message=f"{task_id} to fail"
        )
        assert failed.error.startswith(error), failed.error


# -- bad input -------------------------------------------------------------------------------


async def test_arguments_that_are_not_json_are_refused(enqueued_signals):
    """enqueue()/aenqueue() refuse an argument that is not JSON with the framework's TypeError."""
    # nothing is added and no signal is sent.
    with pytest.raises(TypeError, match="Unsupported type: <class 'datetime.datetime'>"):
        tasks.noop.enqueue(datetime.now())
    with pytest.raises(TypeError, match="Unsupported type: <class 'datetime.datetime'>"):
        await tasks.noop.aenqueue(datetime.now())
    assert Queue("dt-default").counts()["enqueued"] == 0 and enqueued_signals == []


def test_bad_task_options_are_refused():
    """A naive run_after, a priority outside -100..100 or not whole, and a queue the backend does not serve are ..."""
    # ... refused with InvalidTaskError; the bounds themselves are accepted and kept.
    with pytest.raises(InvalidTaskError, match="run_after must be an aware datetime"):
        tasks.noop.using(run_after=datetime.now())
    for bad in (-101, 101, 3.1):
        with pytest.raises(InvalidTaskError, match="priority must be a whole number between -100 and 100"):
            tasks.noop.using(priority=bad)
    with pytest.raises(InvalidTaskError, match="Queue 'dt-retry' is not valid for backend"):
        tasks.noop.using(queue_name="dt-retry")
    for good in (100, -100, 0):
        result = tasks.noop.using(priority=good).enqueue()
        assert backend().get_result(result.id).task.priority == good


async def test_enqueue_validates_the_task_again(enqueued_signals):
    """A task made for another backend's queue is refused at enqueue()/aenqueue() by this backend's validation."""
    # nothing is added.
    elsewhere = tasks.flaky  # backend "retrying", queue dt-retry
    with pytest.raises(InvalidTaskError, match="Queue 'dt-retry' is not valid for backend"):
        backend().enqueue(elsewhere, [1], {})
    with pytest.raises(InvalidTaskError, match="Queue 'dt-retry' is not valid for backend"):
        await backend().aenqueue(elsewhere, [1], {})
    assert Queue("dt-retry").counts()["enqueued"] == 0 and enqueued_signals == []
