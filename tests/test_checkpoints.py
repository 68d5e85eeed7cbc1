"""Generator handlers with checkpoints: each yield is saved (fenced by the lease, at most once per
``checkpoint_every``), a stop signal gives the task back at the next yield to resume from there,
a crash resumes from the last saved one, a timeout or cancel stops it at the next yield."""

import functools
import html
import json
import re
import signal
import sys
import time
from types import SimpleNamespace

import pytest
from django.test import Client

from queues import Queue, handler
from queues.engine import commands, registry
from queues.engine.codes import Code
from queues.engine.controls import LONGEST
from queues.engine.errors import ConfigurationError, InvalidCheckpoint
from queues.engine.worker.checkpoints import CHECKPOINT_DEPTH_MAX, encode
from tests.conftest import ROOT, wait_for
from tests.support.api import Api, make_token
from tests.support.dashboard import make_user
from tests.testapp.checkpoint_tasks import passing_on


def steps_of(client, log):
    """[(step, time)] in the order they were done."""
    return [(int(s), float(t)) for s, t in (x.decode().split() for x in client.lrange(log, 0, -1))]


def runs_of(client, log):
    return [json.loads(x) for x in client.lrange(log + ":runs", 0, -1)]


def wait_steps(client, log, n, timeout=60):
    wait_for(lambda: client.llen(log) >= n, timeout=timeout, interval=0.01, message=f"{n} steps in {log}")


def test_checkpoint_is_fenced_by_the_lease_and_counts_runs(client):
    """Only the current holder may begin a run or save; a stale holder's checkpoint writes nothing; runs are counted."""
    # Only the task's current holder may begin a run or save; a stale holder's checkpoint is
    # refused and writes nothing; each begun run is counted.
    q = Queue("ckf")
    tid = q.enqueue("x")
    commands.register("ckf", "w1", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
    task = commands.start("ckf", "w1", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client).tasks[0]
    assert commands.checkpoint_begin("ckf", tid, task.lease).run(client) == (Code.OK, None, 1)
    assert commands.checkpoint("ckf", tid, task.lease, "[1,2]").run(client) == Code.OK
    assert commands.checkpoint("ckf", tid, str(int(task.lease) + 1), "[9]").run(client) == Code.STALE
    assert commands.checkpoint_begin("ckf", tid, str(int(task.lease) + 1)).run(client) == (Code.STALE, None, 0)
    got = q.get(tid)
    assert (got.checkpoint, got.runs) == ([1, 2], 1)
    assert got.checkpoint_saved_at is not None
    assert got.as_dict()["checkpoint"] == [1, 2]
    # given back: the old lease can no longer save
    assert commands.stop("ckf", "w1", [(tid, task.lease, False)]).run(client) == [Code.REQUEUED]
    assert commands.checkpoint("ckf", tid, task.lease, "[3]").run(client) == Code.STALE
    assert q.get(tid).checkpoint == [1, 2]
    assert q.get(q.enqueue("y")).as_dict()["checkpoint"] is None


@pytest.mark.parametrize(
    "options, message",
    [
        ({"checkpoint_every": -1}, "checkpoint_every must be a number"),
        ({"checkpoint_every": "1"}, "checkpoint_every must be a number"),
        ({"checkpoint_every": True}, "checkpoint_every must be a number"),
    ],
)
def test_bad_checkpoint_every_is_refused(options, message):
    """A bad checkpoint_every raises ConfigurationError naming the queue, and registers nothing."""
    with pytest.raises(ConfigurationError, match=message):
        handler("ck-bad-option", **options)
    assert registry.get_handler("ck-bad-option") is None


def test_checkpoint_every_needs_a_generator_and_a_generator_runs_on_threads():
    """checkpoint_every on a plain function, and a generator with isolation="process", are refused; the default is 1 s."""
    # checkpoint_every on a plain function, and a generator handler with isolation="process",
    # are refused; a generator handler gets the default interval.

    def plain(task):
        return None

    def gen(task):
        yield 1

    with pytest.raises(ConfigurationError, match="checkpoint_every is for a generator handler"):
        handler("ck-plain", checkpoint_every=1)(plain)
    with pytest.raises(ConfigurationError, match='not with isolation="process"'):
        handler("ck-iso", isolation="process")(gen)
    assert registry.get_handler("ck-plain") is None and registry.get_handler("ck-iso") is None
    handler("ck-default")(gen)
    spec = registry.get_handler("ck-default")
    assert spec.checkpoint_every == registry.DEFAULT_CHECKPOINT_EVERY == 1.0
    assert registry.with_isolation(spec, "process").isolation == "thread"
    registry._handlers.pop("ck-default")


@pytest.mark.parametrize("queue", ["ck", "ck-async"])
def test_a_generator_handler_runs_every_step_once_and_completes(client, workers, queue):
    """With no fault, every step runs once in one run that began from None, and the task completes."""
    q = Queue(queue)
    tid = q.enqueue(json.dumps({"n": 200, "sleep": 0.002, "log": f"steps:{queue}"}))
    workers([queue])
    wait_for(lambda: q.counts()["completed"] == 1, timeout=60, message="the task to complete")
    assert [s for s, _ in steps_of(client, f"steps:{queue}")] == list(range(200))
    assert [(r["from"], r["runs"]) for r in runs_of(client, f"steps:{queue}")] == [(0, 1)]
    assert q.get(tid) is None


@pytest.mark.parametrize("queue", ["ck", "ck-async"])
def test_a_stop_signal_gives_the_task_back_first_in_line_at_the_next_yield(client, workers, queue):
    """SIGTERM stops it at its next yield: checkpoint saved, task back first in line, no attempt used, resumed exactly."""
    # SIGTERM stops the generator at its next yield, long before the grace (60 s) is over: the
    # checkpoint is saved, the task goes back to the front of its queue with no attempt used, and
    # the next worker resumes exactly where it stopped (no step twice, none missed).
    q = Queue(queue)
    log = f"steps:{queue}"
    tid = q.enqueue(json.dumps({"n": 400, "sleep": 0.01, "log": log}))
    later = q.enqueue(json.dumps({"n": 1, "log": f"{log}:later"}))
    first = workers([queue], grace=60)
    wait_steps(client, log, 50)
    first.signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 0  # it stopped well within its grace
    done = len(steps_of(client, log))
    task = q.get(tid)
    assert (task.state, task.attempt, task.checkpoint, task.runs) == ("pending", 0, done, 1)
    assert q.get(later).state == "pending"
    workers([queue])
    wait_for(lambda: q.counts()["completed"] == 2, timeout=60, message="both tasks to complete")
    assert [s for s, _ in steps_of(client, log)] == list(range(400))
    assert [(r["from"], r["runs"]) for r in runs_of(client, log)] == [(0, 1), (done, 2)]
    # given back to the front: it ran again before the task enqueued after it
    assert runs_of(client, f"{log}:later")[0]["pid"] == runs_of(client, log)[1]["pid"]
    assert float(client.lindex(f"{log}:later", 0).split()[1]) > steps_of(client, log)[done][1]


def test_a_crash_resumes_from_the_last_saved_checkpoint(client, workers):
    """After kill -9 the next run begins from the last saved checkpoint, redoing at most one interval's steps."""
    # kill -9: the next run begins from the last saved checkpoint; the steps done again are only
    # those after it, at most one interval's worth (0.2 s of steps).
    q = Queue("ck")
    log = "steps:crash"
    q.enqueue(json.dumps({"n": 300, "sleep": 0.01, "log": log}))
    first = workers(["ck"], name="ck-crash")
    wait_steps(client, log, 100)
    first.kill()
    workers(["ck"], name="ck-crash")  # the same name: its tasks go back at once
    wait_for(lambda: q.counts()["completed"] == 1, timeout=60, message="the task to complete")
    runs = runs_of(client, log)
    assert [r["runs"] for r in runs] == [1, 2]
    steps = steps_of(client, log)
    resumed = runs[1]["from"]
    again = [s for s, _ in steps].count
    assert 0 < resumed and all(again(i) == 1 for i in range(resumed))
    assert sorted({s for s, _ in steps}) == list(range(300))
    redone = [s for s in range(300) if again(s) > 1]
    assert redone == list(range(resumed, resumed + len(redone)))
    if redone:  # they were done first within one interval after the save
        firsts = {s: t for s, t in reversed(steps)}
        assert firsts[redone[-1]] - firsts[redone[0]] < 0.2 + 0.2


@pytest.mark.parametrize("queue", ["ck-timeout", "ck-async-timeout"])
def test_a_timeout_stops_it_at_the_next_yield_and_the_retry_resumes(client, workers, queue):
    """A run past its timeout stops at its next yield, saved; the retries resume there until every step is done once."""
    # A run past its timeout (1.5 s) is stopped at its next yield with its last yield saved; the
    # retries resume from there until every step is done, each once.
    q = Queue(queue)
    log = f"steps:{queue}"
    q.enqueue(json.dumps({"n": 250, "sleep": 0.01, "log": log}))
    workers([queue])
    wait_for(lambda: q.counts()["completed"] == 1, timeout=90, message="the task to complete")
    runs = runs_of(client, log)
    assert len(runs) >= 2 and runs[0]["from"] == 0
    assert [r["from"] for r in runs] == sorted(r["from"] for r in runs)
    assert [r["attempt"] for r in runs] == list(range(1, len(runs) + 1))
    assert [s for s, _ in steps_of(client, log)] == list(range(250))


def test_a_cancel_stops_a_sync_generator_at_its_next_yield(client, workers):
    """Cancelling a running sync generator handler stops it at its next yield: no more steps."""
    q = Queue("ck")
    log = "steps:cancel"
    tid = q.enqueue(json.dumps({"n": 100000, "sleep": 0.005, "log": log}))
    workers(["ck"])
    wait_steps(client, log, 20)
    q.cancel(tid)
    wait_for(lambda: q.get(tid) is None, timeout=30, message="the task to be cancelled")
    time.sleep(0.5)
    n = client.llen(log)
    time.sleep(0.5)
    assert client.llen(log) == n < 100000


@pytest.mark.parametrize(
    "kind, message",
    [
        ("object", "a checkpoint must be JSON-serialisable; the handler yielded a object"),
        ("big", "a checkpoint is at most 65,536 bytes as JSON; the handler yielded 70,002"),
        ("surrogate", "a checkpoint must be JSON-serialisable; the handler yielded a str ('utf-8' codec"),
        ("deep", "a checkpoint's lists and dicts nest at most 100 levels deep; the handler yielded a list"),
    ],
)
def test_a_checkpoint_that_cannot_be_saved_fails_the_task_clearly(client, workers, kind, message):
    """A yield that is not JSON, or over 64 KB as JSON, fails the attempt with a clear error and saves nothing."""
    # A yield that is not JSON, or over 64 KB as JSON, fails the attempt with a clear error
    # naming the task; nothing of it is saved.
    q = Queue("ck-fail")
    tid = q.enqueue(json.dumps({"n": 5, "log": f"steps:{kind}", "yield": kind}))
    workers(["ck-fail"])
    wait_for(lambda: q.counts()["failed"] == 1, timeout=30, message="the task to fail")
    task = q.get(tid)
    assert task.error.startswith("InvalidCheckpoint: task " + tid)
    assert message in task.error
    assert task.checkpoint is None
    assert client.llen(f"steps:{kind}") == 1


def test_10000_steps_under_5_stop_signals_and_3_kills(client, workers):
    """10,000 steps, 5 SIGTERMs and 3 kill -9: every step done, none twice but after a kill's last save; completed."""
    # A checkpointed task of 10,000 steps, its worker sent SIGTERM 5 times and killed (-9) 3
    # times, each fault after a few hundred more steps: every step is done at least once; after a
    # SIGTERM the next run resumes exactly where the last one stopped; the only steps done twice
    # are those after the last saved checkpoint of a kill, each kill's a run of steps done first
    # within one interval (0.2 s) of the save; the task completes, in 9 runs. The step log is a
    # Redis list the faults don't touch.
    q = Queue("ck")
    log, n, every = "steps:soak", 10_000, 0.2
    tid = q.enqueue(json.dumps({"n": n, "sleep": 0.001, "log": log}))
    faults = ["TERM", "KILL", "TERM", "TERM", "KILL", "TERM", "KILL", "TERM"]
    ends = []  # the step log's length when each faulted worker was gone
    for fault in faults:
        w = workers(["ck"], name="ck-soak", grace=60)
        wait_steps(client, log, (ends[-1] if ends else 0) + 400, timeout=120)
        if fault == "TERM":
            w.signal(signal.SIGTERM)
            assert w.wait(timeout=60) == 0
            assert q.get(tid).state == "pending"  # given back, not left active
        else:
            w.kill()
        ends.append(client.llen(log))
    workers(["ck"], name="ck-soak")
    wait_for(lambda: q.counts()["completed"] == 1, timeout=180, interval=0.1, message="the task to complete")
    steps, runs = steps_of(client, log), runs_of(client, log)
    assert len(runs) == len(faults) + 1 and [r["runs"] for r in runs] == list(range(1, len(faults) + 2))
    assert len({r["pid"] for r in runs}) == len(runs)
    assert {s for s, _ in steps} == set(range(n))
    bounds = [0, *ends, len(steps)]
    segments = [steps[a:b] for a, b in zip(bounds, bounds[1:])]  # each worker's steps, in order
    redone_total, spans = 0, []
    for k, fault in enumerate(faults):
        done, resumed = segments[k], runs[k + 1]["from"]
        assert [s for s, _ in done] == list(range(runs[k]["from"], runs[k]["from"] + len(done)))
        last = done[-1][0]
        if fault == "TERM":
            assert resumed == last + 1  # stopped at a yield, that yield saved: nothing twice
        else:
            redone = [(s, t) for s, t in done if s >= resumed]
            assert resumed <= last + 1 and redone == done[len(done) - len(redone) :]
            if len(redone) > 1:  # done within one interval of the save (plus the longest step)
                gaps = [b - a for (_, a), (_, b) in zip(done, done[1:])]
                spans.append(redone[-1][1] - redone[0][1])
                assert spans[-1] <= every + max(gaps)
            redone_total += len(redone)
    assert segments[-1][-1][0] == n - 1
    assert len(steps) == n + redone_total
    figures = {"steps": n, "runs": len(runs), "redone_after_kills": redone_total, "redo_spans_s": spans}
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    (ROOT / "test-artifacts" / "checkpoints-faults.json").write_text(json.dumps(figures, indent=1))


def _checkpointed_task(client, queue, value):
    """A task whose run began (run 1) and saved ``value`` (JSON text), as a worker does."""
    tid = Queue(queue).enqueue("x")
    commands.register(queue, "w1", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
    task = commands.start(queue, "w1", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client).tasks[0]
    commands.checkpoint_begin(queue, tid, task.lease).run(client)
    assert commands.checkpoint(queue, tid, task.lease, value).run(client) == Code.OK
    return tid


@pytest.mark.django_db
def test_the_http_api_returns_the_checkpoint_its_time_and_runs(client):
    """GET /api/tasks/<id> has checkpoint, checkpoint_saved_at and runs (null, null, 0 for a plain task)."""
    # GET /api/tasks/<id> has ``checkpoint`` (the JSON value), ``checkpoint_saved_at`` and
    # ``runs``; a task that never ran a generator has null, null and 0.
    api = Api(make_token("view_dashboard"))
    tid = _checkpointed_task(client, "ckapi", json.dumps({"cursor": "2026-01-01", "done": 41}))
    body = api.get(f"/api/tasks/{tid}").json()
    assert body["checkpoint"] == {"cursor": "2026-01-01", "done": 41}
    assert body["runs"] == 1 and body["checkpoint_saved_at"] >= body["started_at"]
    plain = api.get(f"/api/tasks/{Queue('ckapi').enqueue('y')}").json()
    assert (plain["checkpoint"], plain["checkpoint_saved_at"], plain["runs"]) == (None, None, 0)


@pytest.mark.django_db
def test_the_task_page_shows_the_checkpoint_when_it_was_saved_and_the_runs(client):
    """The task page shows the checkpoint (escaped, cut at 2,000 characters), when it was saved and the runs."""
    # The task page shows the checkpoint as JSON (escaped, cut at 2,000 characters), when it was
    # saved and how many runs began; a task with no checkpoint shows no such rows.
    web = Client()
    web.force_login(make_user("ckviewer", perms=["view_dashboard"]))
    tid = _checkpointed_task(client, "ckpage", json.dumps({"at": "<b>x</b>", "pad": "y" * 3000}))
    page = web.get(f"/queues/task/{tid}/").content.decode()
    shown = re.search(r'data-field="checkpoint">([^<]*)</code> saved (\S+ \S+) UTC', page)
    assert shown and "<b>" not in page and html.unescape(shown.group(1)).startswith('{"at": "<b>x</b>", "pad": "yyy')
    assert len(html.unescape(shown.group(1))) == 2001 and shown.group(1).endswith("y…")
    assert re.search(r'data-field="runs">1<', page)
    plain = web.get(f"/queues/task/{Queue('ckpage').enqueue('y')}/").content.decode()
    assert 'data-field="checkpoint"' not in plain and 'data-field="runs"' not in plain


def test_a_tight_loop_writes_at_most_one_checkpoint_per_interval(client, workers):
    """A loop of thousands of fast steps saves its checkpoint at most once per checkpoint_every (0.2 s)."""
    # The handler reads its saved checkpoint before each step and notes each change: the
    # generator waits for every save, so it sees each; by Redis's clock (the time each save was
    # written, ms) consecutive saves are at least 0.2 s apart (load only spaces them further),
    # and each saved value is a step it had yielded.
    q = Queue("ck")
    log, n = "steps:tight", 30000  # several intervals' worth, even on a fast machine
    q.enqueue(json.dumps({"n": n, "log": log, "watch": True}))
    workers(["ck"])
    wait_for(lambda: q.counts()["completed"] == 1, timeout=120, message="the task to complete")
    saves = [(int(v), float(t)) for v, t in (x.decode().split() for x in client.lrange(log + ":saves", 0, -1))]
    steps = client.llen(log)
    assert steps == n and len(saves) >= 2  # it saved as it went, far fewer times than it yielded
    assert len(saves) < n / 10
    assert all(b - a >= 199 for (_, a), (_, b) in zip(saves, saves[1:])), saves  # ms: 1 for rounding
    assert [v for v, _ in saves] == sorted({v for v, _ in saves}) and all(0 < v <= n for v, _ in saves)


def test_with_no_grace_the_last_yield_is_saved_before_the_task_goes_back(client, workers):
    """With --grace 0 a sync generator in the middle of a step is given back with its last yield saved."""
    # checkpoint_every is an hour, so no save happens on the way: only the stop saves. The step
    # under way (0.3 s of sleep) dies with the worker; the next run starts right after the last
    # step logged.
    q = Queue("ck-rare")
    log = "steps:nograce"
    tid = q.enqueue(json.dumps({"n": 12, "sleep": 0.3, "log": log}))
    first = workers(["ck-rare"], grace=0)
    wait_steps(client, log, 3)
    first.signal(signal.SIGTERM)
    first.wait(timeout=30)
    task = q.get(tid)
    done = client.llen(log)
    # the last yield is saved: the step logged last, or (a stop landing between a step's log line
    # and its yield, on a loaded machine) the one before it, which then runs again
    assert (task.state, task.attempt) == ("pending", 0) and task.checkpoint in (done, done - 1), (task, done)
    saved = task.checkpoint
    workers(["ck-rare"])
    wait_for(lambda: q.counts()["completed"] == 1, timeout=60, message="the task to complete")
    assert [s for s, _ in steps_of(client, log)] == list(range(done)) + list(range(saved, 12))
    assert [r["from"] for r in runs_of(client, log)] == [0, saved]


def _nested(depth, leaf=0):
    """``leaf`` in lists (and a dict at every other level) nested ``depth`` levels deep."""
    value = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


def test_encode_refuses_what_redis_or_json_loads_could_not_take_back():
    """A lone surrogate, lists and dicts nested over 100 levels, or a RecursionError are InvalidCheckpoint."""
    # A string with a lone surrogate passes json.dumps but isn't UTF-8 (redis-py can't send it);
    # lists and dicts nested deeper than CHECKPOINT_DEPTH_MAX (100) are refused (json.loads would
    # recurse as deep reading them back); a RecursionError of json.dumps itself (a deep value, or a
    # deep stack) and a cycle are refused as not JSON-serialisable.
    task = SimpleNamespace(id="t1", queue="q")
    for value in ["\ud800", {"a\udc80": 1}, [1, {"k": ["x\udfff"]}]]:
        with pytest.raises(InvalidCheckpoint, match=r"task t1 of queue 'q': a checkpoint must be JSON-serialisable"):
            encode(task, value)
    assert CHECKPOINT_DEPTH_MAX == 100
    assert encode(task, _nested(100)) == json.dumps(_nested(100), separators=(",", ":"))
    assert encode(task, ("é", "\U0001f600")) == '["é","\U0001f600"]'
    for value in [_nested(101), [1, 2, _nested(101)], {"a": [_nested(100)]}]:
        with pytest.raises(InvalidCheckpoint, match=r"task t1 of queue 'q': .* nest at most 100 levels deep"):
            encode(task, value)
    loop = []
    loop += [loop, loop]  # walked level by level, 2**100 lists: json.dumps refuses it first
    for value, why in [(_nested(5000), "maximum recursion depth"), (loop, "Circular reference")]:
        with pytest.raises(InvalidCheckpoint, match=rf"task t1 of queue 'q': .* JSON-serialisable.*{why}"):
            encode(task, value)
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    limit = sys.getrecursionlimit()
    with pytest.raises(
        InvalidCheckpoint, match=r"must be JSON-serialisable; the handler yielded a dict \(maximum recursion"
    ):
        sys.setrecursionlimit(depth + 25)  # json.dumps can't go 100 levels deep from here
        try:
            encode(task, _nested(100))
        finally:
            sys.setrecursionlimit(limit)


def test_a_saved_checkpoint_too_deep_to_read_back_reads_as_its_text_and_fails_the_run_clearly(client, workers):
    """A saved checkpoint json.loads can't read (an older worker's) is its text to Queue.get; a run fails with InvalidCheckpoint."""
    # Saved (as a worker before the depth limit could) 3,000 levels deep, then given back:
    # Queue.get (the HTTP API and the dashboard read the same) gives its text; the next run fails
    # its attempt with InvalidCheckpoint naming the task, before the handler runs.
    q, log, text = Queue("ck-fail"), "steps:unreadable", "[" * 3000 + "]" * 3000
    tid = q.enqueue(json.dumps({"n": 5, "log": log}))
    commands.register("ck-fail", "w1", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
    task = commands.start("ck-fail", "w1", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client)
    lease = task.tasks[0].lease
    assert commands.checkpoint_begin("ck-fail", tid, lease).run(client)[0] == Code.OK
    assert commands.checkpoint("ck-fail", tid, lease, text).run(client) == Code.OK
    assert commands.stop("ck-fail", "w1", [(tid, lease, False)]).run(client) == [Code.REQUEUED]
    assert q.get(tid).checkpoint == text
    workers(["ck-fail"])
    wait_for(lambda: q.counts()["failed"] == 1, timeout=30, message="the task to fail")
    got = q.get(tid)
    assert got.error.startswith(f"InvalidCheckpoint: task {tid} of queue 'ck-fail': its saved checkpoint can't be read")
    assert "RecursionError" in got.error and got.checkpoint == text
    assert client.llen(log) == 0 and client.llen(log + ":runs") == 0


@pytest.mark.parametrize("value", [10**400, float("inf"), 1e308, float("nan"), LONGEST + 1, -0.001])
def test_checkpoint_every_is_a_finite_number_of_seconds_up_to_30_days(value):
    """checkpoint_every over 30 days (or infinite, or too big for a float) is a ConfigurationError; 30 days is accepted."""
    with pytest.raises(
        ConfigurationError,
        match=r"handler 'ck-bounds': checkpoint_every must be a number of seconds >= 0 and <= 2592000",
    ):
        handler("ck-bounds", checkpoint_every=value)
    assert registry.get_handler("ck-bounds") is None

    def gen(task):
        yield 1

    handler("ck-bounds", checkpoint_every=LONGEST)(gen)
    assert registry.get_handler("ck-bounds").checkpoint_every == 2592000.0
    registry._handlers.pop("ck-bounds")


def test_a_generator_under_a_wraps_decorator_is_a_generator_handler():
    """A generator under functools.wraps decorators is a generator handler; an async def under a sync one is async."""
    # Seen through any number of decorators that keep the function as __wrapped__; an async def
    # decorator is an async handler itself (it may consume the generator), not a generator one.

    def gen(task):
        yield 1

    async def agen(task):
        yield 1

    async def coroutine(task):
        return None

    def collecting(func):
        @functools.wraps(func)
        async def call(task):
            return [x async for x in func(task)]

        return call

    cases = [
        ("ck-wr-sync", passing_on(gen), True, False),
        ("ck-wr-twice", passing_on(passing_on(gen)), True, False),
        ("ck-wr-async", passing_on(agen), True, True),
        ("ck-wr-collect", collecting(agen), False, True),
        ("ck-wr-coroutine", passing_on(coroutine), False, True),  # awaited on the loop, not run on a thread
    ]
    for queue, func, checkpointed, is_async in cases:
        handler(queue)(func)
        spec = registry._handlers.pop(queue)
        assert (spec.checkpointed, spec.is_async) == (checkpointed, is_async), queue
    handler("ck-wr-every", checkpoint_every=0.5)(passing_on(agen))
    assert registry._handlers.pop("ck-wr-every").checkpoint_every == 0.5
    with pytest.raises(ConfigurationError, match="a chunk handler can't be a generator"):
        handler("ck-wr-chunk", chunk=5)(passing_on(gen))
    with pytest.raises(ConfigurationError, match='not with isolation="process"'):
        handler("ck-wr-iso", isolation="process")(passing_on(gen))
    with pytest.raises(ConfigurationError, match="checkpoint_every is for a generator handler"):
        handler("ck-wr-collect", checkpoint_every=1)(collecting(agen))


@pytest.mark.parametrize("queue", ["ck-wrapped", "ck-async-wrapped"])
def test_a_generator_handler_under_a_decorator_runs_its_steps(client, workers, queue):
    """A generator handler under a functools.wraps decorator runs as one: every step once, its result kept."""
    q = Queue(queue)
    log = f"steps:{queue}"
    tid = q.enqueue(json.dumps({"n": 20, "log": log}))
    workers([queue])
    wait_for(lambda: q.counts()["completed"] == 1, timeout=60, message="the task to complete")
    assert [s for s, _ in steps_of(client, log)] == list(range(20))
    assert [(r["from"], r["runs"]) for r in runs_of(client, log)] == [(0, 1)]
    if queue == "ck-wrapped":
        assert q.get(tid).result == b"20 steps"  # kept as the bytes it was stored as


def test_a_decorator_that_does_not_return_the_generator_fails_the_task_saying_so(client, workers):
    """A wraps decorator that returns the generator's values (a list): the attempt fails with an error naming it."""
    q = Queue("ck-collected")
    tid = q.enqueue(json.dumps({"n": 3, "log": "steps:ck-collected"}))
    workers(["ck-collected"])
    wait_for(lambda: q.counts()["failed"] == 1, timeout=30, message="the task to fail")
    error = q.get(tid).error
    assert error.startswith("TypeError: handler 'ck-collected' is a generator function, but calling it"), error
    assert "returned a list, not a generator: a decorator must return the generator" in error


def _stopped_while(workers, queue, payload, running):
    """Enqueue ``payload`` (its log: ``steps:<queue>``), start a worker (grace 60 s), wait for
    ``running(log)``, then SIGTERM it. Returns (the Queue, the task id, the log, the worker)."""
    q, log = Queue(queue), f"steps:{queue}"
    tid = q.enqueue(json.dumps({**payload, "log": log}))
    worker = workers([queue], grace=60)
    running(log)
    worker.signal(signal.SIGTERM)
    return q, tid, log, worker


@pytest.mark.parametrize("queue", ["ck-final", "ck-async-final"])
def test_a_generator_that_ends_while_its_worker_stops_completes(client, workers, queue):
    """A stop signal while a generator runs its code after its last yield: it ends within the grace and completes."""
    # SIGTERM arrives while the generator is past its last yield (a 2 s finalisation): there is
    # no yield left to stop at, it ends within the grace (60 s), and its task is completed, not
    # given back to do its finalisation again.
    q, tid, log, first = _stopped_while(
        workers,
        queue,
        {"n": 3, "final": 2},
        lambda log: wait_for(lambda: b"final-begin" in client.lrange(log, 0, -1), message="the finalisation"),
    )
    assert first.wait(timeout=30) == 0
    assert q.get(tid) is None and q.counts()["completed"] == 1
    assert client.lrange(log, -2, -1) == [b"final-begin", b"final-end"]
    assert len(runs_of(client, log)) == 1


@pytest.mark.parametrize("queue", ["ck-close-raises", "ck-async-close-raises"])
def test_a_finally_that_raises_at_a_stop_still_saves_the_checkpoint(client, workers, queue):
    """Closed at a stop, a generator whose finally raises still has its last yield saved; that error fails the attempt."""
    # No save on the way (an hour's interval): only the stop's save writes the checkpoint. The
    # generator's own ``except GeneratorExit`` raises as it is closed there: the checkpoint is
    # saved all the same, and that error is the attempt's failure (no retries).
    q, tid, log, first = _stopped_while(
        workers, queue, {"n": 100000, "sleep": 0.02}, lambda log: wait_steps(client, log, 5)
    )
    first.wait(timeout=30)
    task = q.get(tid)
    done = client.llen(log)
    assert (task.state, task.attempt) == ("failed", 1)
    assert task.error.startswith("RuntimeError: its cleanup failed"), task.error
    assert task.checkpoint in (done, done - 1), (task.checkpoint, done)
