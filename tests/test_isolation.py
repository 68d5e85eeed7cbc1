"""Isolated handlers (``isolation="process"``), for real: timeouts and cancels end the handler's
process, crashes fail the attempt, locks wait for the process's end, processes are recycled."""

import json
import os
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from queues import Queue, handler
from queues.engine import readmodel, registry
from queues.engine.config import Config
from queues.engine.errors import ConfigurationError
from tests.conftest import records, wait_for, wait_registered
from tests.support.api import Api, make_token


def pids(client, task_id):
    return [int(p) for p in client.lrange(f"test:pid:{task_id}", 0, -1)]


def exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def started(client, task_id, n=1):
    """The pid of the n-th run of a task, once it has started."""
    return wait_for(
        lambda: len(pids(client, task_id)) >= n and pids(client, task_id)[n - 1],
        timeout=60,  # a ceiling: a loaded machine starts a worker and its handler process slowly
        message=f"run {n} of {task_id} to start",
    )


def test_an_isolated_handler_runs_in_its_own_process_with_the_task_and_django(client, workers):
    """The handler gets the task (id, queue, payload, attempt) in a process that is not the worker's, with ..."""
    # ... Django set up there (the ORM works); its result is kept as in a thread.
    q = Queue("p1")
    w = workers(["p1"], name="iso-basic")
    tid = q.enqueue('{"orm": 1}')
    wait_for(lambda: q.counts()["completed"] == 1, message="the task to complete")
    [rec] = records(client, "p1")
    assert (rec["id"], rec["queue"], rec["payload"], rec["attempt"]) == (tid, "p1", '{"orm": 1}', 1)
    assert rec["pid"] != w.pid and rec["pid"] == pids(client, tid)[0]
    assert client.lrange(f"test:orm:{tid}", 0, -1) == [b"0"]


def test_a_spinning_handler_fails_by_its_timeout_and_its_process_is_gone(client, workers):
    """A `while True: pass` handler with timeout=2."""
    # the attempt fails by its timeout (within timeout + KILL_GRACE + 1 s on a quiet machine; the waits have generous
    # ceilings, as the handler spins for ever otherwise), its process is gone, and a fresh one serves the next task.
    q = Queue("pspin")
    workers(["pspin"], name="iso-spin")
    wait_registered(client, "iso-spin")
    spin, after = q.enqueue_many(['{"spin": 1}', "after"])
    pid = started(client, spin)
    wait_for(lambda: q.counts()["failed"] == 1, timeout=60, message="the timeout")
    assert q.get(spin).error == "TaskTimeout: ran longer than its timeout of 2 s"
    wait_for(lambda: not exists(pid), timeout=60, message="its process to go")
    wait_for(lambda: q.counts()["completed"] == 1, message="the next task to run")
    assert pids(client, after)[0] != pid


def test_a_handler_ignoring_sigterm_is_killed_after_kill_grace(client, workers):
    """SIGTERM ignored: the timeout is recorded at once, the process lives on through KILL_GRACE (1 s here) and ..."""
    # ... is then killed; the slot serves the next task.
    q = Queue("pspin")
    workers(["pspin"], name="iso-stubborn", env={"WORQR_TEST_KILL_GRACE": "1"})
    stubborn, after = q.enqueue_many(['{"stubborn": 1}', "after"])
    pid = started(client, stubborn)
    wait_for(lambda: q.counts()["failed"] == 1, timeout=60, message="the timeout")
    assert exists(pid)  # SIGTERM was ignored: still there, until the SIGKILL
    # about KILL_GRACE later; a ceiling only (it sleeps for ever otherwise)
    wait_for(lambda: not exists(pid), timeout=30, message="the SIGKILL")
    wait_for(lambda: q.counts()["completed"] == 1, message="the next task to run")


def test_a_locked_task_waits_for_the_killed_process_to_be_gone(client, workers):
    """A locked isolated task that times out."""
    # the next task on the same lock starts only once the killed process is gone (it checks from its own handler), not
    # at the timeout.
    q = Queue("plock")
    workers(["plock"], concurrency=2, name="iso-lock", env={"WORQR_TEST_KILL_GRACE": "1.5"})
    first = q.enqueue('{"stubborn": 1}')
    started(client, first)
    second = q.enqueue(f'{{"after": "{first}"}}')
    wait_for(lambda: q.counts()["failed"] == 1, timeout=60, message="the first task to time out")
    wait_for(lambda: q.counts()["completed"] == 1, timeout=60, message="the second task to run")
    assert client.lrange(f"test:alive:{second}", 0, -1) == [b"0"]


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["queue", "api", "dashboard"])
def test_cancel_of_a_cpu_bound_isolated_task_stops_it_within_1_s(client, workers, how, django_user_model):
    """Cancel (Queue.cancel, the HTTP API, the dashboard's action) of a task spinning on the CPU."""
    # its process is gone (within 1 s on a quiet machine; the waits have generous ceilings, as it spins for ever
    # otherwise), the task is cancelled, and the worker carries on.
    from django.test import Client as Web
    from django.urls import reverse

    q = Queue("p2")
    workers(["p2"], name=f"iso-cancel-{how}")
    tid = q.enqueue('{"spin": 1}')
    pid = started(client, tid)
    if how == "queue":
        assert q.cancel(tid) is True
    elif how == "api":
        assert Api(make_token("cancel_task")).delete(f"/api/tasks/{tid}").json()["result"] == "cancelled"
    else:
        web = Web()
        web.force_login(django_user_model.objects.create_superuser("boss", password="pw"))
        assert web.post(reverse("queues:task-cancel", args=[tid])).status_code == 302
    wait_for(lambda: not exists(pid), timeout=30, message="the process to be gone")
    wait_for(lambda: q.get(tid) is None and q.counts()["cancelled"] == 1, timeout=30, message="the cancel")
    nxt = q.enqueue("next")
    wait_for(lambda: q.get(nxt) is None and q.counts()["completed"] == 1, message="the worker to carry on")


def test_sigterm_marks_the_task_cancelled_and_runs_the_handlers_finally_blocks(client, workers):
    """A cancelled isolated handler unwinds: its `finally` block runs and sees task.cancelled."""
    q = Queue("p2")
    workers(["p2"], name="iso-cleanup")
    tid = q.enqueue('{"linger": 1}')
    started(client, tid)
    q.cancel(tid)
    assert wait_for(lambda: client.lrange(f"test:cleanup:{tid}", 0, -1), timeout=30, message="the finally block") == [
        b"1"
    ]


@pytest.mark.parametrize(
    "crash, error",
    [
        ("segfault", "WorkerCrashed: handler process exited with signal 11"),
        (3, "WorkerCrashed: handler process exited with exit code 3"),
    ],
)
def test_a_crashing_handler_fails_its_attempt_and_the_worker_carries_on(client, workers, crash, error):
    """A handler that segfaults or calls os._exit(3)."""
    # each attempt fails with that error and is retried per its retries (1), the task ends failed, and the worker serves
    # the next task.
    q = Queue("pcrash")
    w = workers(["pcrash"], name="iso-crash")
    tid = q.enqueue(f'{{"crash": "{crash}"}}' if crash == "segfault" else f'{{"crash": {crash}}}')
    wait_for(lambda: q.counts()["failed"] == 1, timeout=10, message="both attempts to fail")
    assert q.get(tid).attempt == 2 and q.get(tid).error == error
    assert [f["error"] for f in q.failures()] == [error, error]
    assert len(set(pids(client, tid))) == 2  # one process per attempt: the crashed one was replaced
    nxt = q.enqueue("fine")
    wait_for(lambda: q.get(nxt) is None and q.counts()["completed"] == 1, message="the worker to carry on")
    assert w.proc.poll() is None


def test_max_tasks_per_child_recycles_the_processes(client, workers):
    """--max-tasks-per-child 10 over 100 tasks: at least 10 distinct handler processes."""
    q = Queue("p3")
    q.enqueue_many([str(i) for i in range(100)])
    workers(["p3"], concurrency=2, name="iso-recycle", options=("--max-tasks-per-child", "10"))
    wait_for(lambda: q.counts()["completed"] == 100, timeout=60, message="100 tasks")
    assert len({r["pid"] for r in records(client, "p3")}) >= 10


def test_max_memory_recycles_a_process_over_the_limit(client, workers):
    """--max-memory: a process that grew past the limit is replaced after its task."""
    # one under the limit keeps serving.
    q = Queue("p3")
    workers(["p3"], name="iso-memory", options=("--max-memory", "250"))
    small, hog, after = q.enqueue_many(["small", '{"hog": 300}', "after"])
    wait_for(lambda: q.counts()["completed"] == 3, timeout=20, message="three tasks")
    assert pids(client, small) == pids(client, hog) != pids(client, after)


def test_bad_isolation_input_is_refused(client):
    """isolation other than thread/process, an isolated lambda, closure or async handler, a bad --processes, ..."""
    # ... limits without isolated handlers, a bad KILL_GRACE: clear errors at start-up, and no worker is registered.
    with pytest.raises(ConfigurationError, match='isolation must be "thread" or "process"'):
        handler("pbad", isolation="fork")
    with pytest.raises(ConfigurationError, match="not a lambda or a closure"):
        handler("pbad", isolation="process")(lambda task: None)

    def closure(task):
        return None

    with pytest.raises(ConfigurationError, match="not a lambda or a closure"):
        handler("pbad", isolation="process")(closure)

    async def coroutine(task):
        return None

    with pytest.raises(ConfigurationError, match="for sync handlers"):
        handler("pbad", isolation="process")(coroutine)
    handler("pclosure")(closure)  # fine on a thread, refused once --isolation process applies to it
    try:
        with pytest.raises(CommandError, match="importable by its module path"):
            call_command("worker", "pclosure", "--isolation", "process")
    finally:
        registry._handlers.pop("pclosure")
    for value in ("0", "-1", "two", "1.5"):
        with pytest.raises(CommandError, match="--processes: must be a whole number >= 1 or auto"):
            call_command("worker", "t1", "--processes", value)
    with pytest.raises(CommandError, match="--isolation: invalid choice"):
        call_command("worker", "t1", "--isolation", "fork")
    with pytest.raises(CommandError, match="no handler served here"):
        call_command("worker", "t1", "--max-tasks-per-child", "10")
    with pytest.raises(CommandError, match="--max-memory: must be a whole number >= 1"):
        call_command("worker", "p1", "--max-memory", "0", stdout=StringIO())
    with pytest.raises(ConfigurationError, match="KILL_GRACE"):
        Config.from_mapping({"KILL_GRACE": -1})
    assert registry.get_handler("pbad") is None
    assert readmodel.workers(client) == []


def test_an_isolated_handlers_spans_are_children_of_its_run_span(spans, traced):
    """The worker's run span is current in the handler's process."""
    # a span the handler makes there is its child, in the enqueue's trace.
    task_id = Queue("p1").enqueue('{"span": "handler work"}')
    traced(["p1"], name="iso-traced")
    (run,) = wait_for(lambda: traced.named("worqr run p1"), timeout=20, message="the run span")
    (work,) = wait_for(lambda: traced.named("handler work"), timeout=5, message="the handler's span")
    assert run["attributes"]["messaging.message.id"] == task_id
    assert work["parent_id"] == run["context"]["span_id"]
    assert work["context"]["trace_id"] == run["context"]["trace_id"]


def test_a_failed_link_to_a_handler_process_ends_and_replaces_it(client, workers):
    """The worker's link to one of its handler processes fails (fault injected once)."""
    # the error is logged, that process is replaced, and both slots of concurrency 2 run tasks side by side.
    q = Queue("p2")
    w = workers(["p2"], concurrency=2, name="iso-link", env={"WORQR_FAULT": "procpool-link-raise"})
    wait_registered(client, "iso-link")
    wait_for(lambda: "lost the link to handler process" in w.output(), timeout=10, message=lambda: w.output())
    assert "InjectedFault: fault injected at procpool-link-raise" in w.output()
    ids = q.enqueue_many(['{"sleep": 2}', '{"sleep": 2}'])
    wait_for(lambda: q.counts()["active"] == 2, timeout=10, message="two tasks running at once")
    wait_for(lambda: q.counts()["completed"] == 2, timeout=15, message="both tasks to complete")
    assert len({r["pid"] for r in records(client, "p2") if r["id"] in ids}) == 2
    assert w.proc.poll() is None


def test_isolation_process_flag_isolates_only_sync_handlers_that_dont_choose(client, workers):
    """--isolation process: an unmarked sync handler runs in a child, async and isolation="thread" ones don't."""
    # The flag is a default: a handler that chose isolation="thread" keeps its thread, and an
    # async one always runs on the worker's event loop.
    w = workers(["t1", "a1", "pthread"], name="iso-flag", options=("--isolation", "process"))
    ids = {q: Queue(q).enqueue(f"{q} work") for q in ("t1", "a1", "pthread")}
    for q in ids:
        wait_for(lambda q=q: Queue(q).counts()["completed"] == 1, timeout=15, message=f"the {q} task")
    ran_in = {q: records(client, q)[0]["pid"] for q in ids}
    assert {q: records(client, q)[0]["id"] for q in ids} == ids
    assert ran_in["t1"] != w.pid
    assert ran_in["a1"] == w.pid and ran_in["pthread"] == w.pid


def test_django_is_set_up_once_per_handler_process_not_per_task(client, workers):
    """Several tasks on one isolated handler process: one process, and its initializer ran once."""
    q = Queue("pinit")
    w = workers(["pinit"], name="iso-init")
    ids = q.enqueue_many([str(i) for i in range(5)])
    wait_for(lambda: q.counts()["completed"] == 5, timeout=15, message="five tasks")
    seen = [json.loads(client.lindex(f"test:init:{tid}", 0)) for tid in ids]
    assert len({pid for pid, _ in seen}) == 1 and seen[0][0] != w.pid
    assert [inits for _, inits in seen] == [1] * 5


def test_kill_grace_defaults_to_5_seconds():
    """WORQR["KILL_GRACE"] unset: an isolated handler gets 5 s between SIGTERM and SIGKILL."""
    assert Config().kill_grace == 5.0
    assert Config.from_mapping({}).kill_grace == 5.0


def test_a_handler_process_given_a_task_past_its_start_by_answers_late_and_runs_nothing(client):
    """A rate-limited task that reaches its handler process after its start_by is not run there ('late'); in time, it is."""
    import pickle
    import socket

    from queues.engine.task import Task
    from queues.engine.worker import child

    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the handler process, as the fork server makes it
        ours.close()
        child.serve(theirs, os.getppid(), {"p1": registry.get_handler("p1")})
    theirs.close()
    stream = ours.makefile("rb")

    def read():
        (size,) = child.HEADER.unpack(stream.read(child.HEADER.size))
        return pickle.loads(stream.read(size))

    try:
        assert read()[0] == "ready"
        late, in_time = (Task(id=f"p1-{os.urandom(8).hex()}", queue="p1", payload="{}") for _ in range(2))
        ours.sendall(child.frame(("p1", late, "", time.monotonic() - 0.001)))
        assert read()[0] == "late"
        ours.sendall(child.frame(("p1", in_time, "", time.monotonic() + 30)))
        assert read()[0] == "ok"
        assert pids(client, late.id) == [] and pids(client, in_time.id) == [pid]
    finally:
        stream.close()
        ours.close()  # the process reads the end of its socket and exits
        os.waitpid(pid, 0)
