"""The Tasks framework's backend contract, checked against WorqrBackend.

django-tasks checks its own backends for what a caller relies on: enqueue, results and their
refresh, statuses, errors, run_after, priorities, takes_context, async functions, signals, and
the errors bad input gets. These are those checks, written for worqr and run with real worker
processes wherever a task must run. Where worqr deliberately answers differently, the test checks
worqr's answer, and README "Django's Tasks framework" lists the difference.
"""

import dataclasses
import json
import os
import threading
import uuid
from datetime import datetime, timedelta

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
from tests.conftest import wait_for
from tests.tasksapp import tasks

try:
    from django.tasks.exceptions import TaskResultMismatch
except ImportError:
    from django_tasks.exceptions import TaskResultMismatch

QUEUES = ["dt-default", "dt-emails", "dt-retry"]


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


def traces(client, name):
    return [json.loads(r) for r in client.lrange(f"test:dt:{name}", 0, -1)]


@pytest.fixture
def enqueued_signals():
    """(sender, result) of every task_enqueued signal sent while the test runs."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result))

    task_enqueued.connect(receiver, dispatch_uid="test_tasks_backend_contract")
    yield seen
    task_enqueued.disconnect(dispatch_uid="test_tasks_backend_contract")


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
