"""Handlers the tests run in real worker processes.

Payloads are JSON objects of directives (any other payload is just recorded):
  sleep  seconds to run (sync handlers check task.cancelled every 10 ms)
  deaf   true: a sync handler never looks at task.cancelled (its thread outlives a timeout)
  fail   "always", or the number of first attempts that raise
  log    Redis list to RPUSH a record to: id, payload, attempt, pid, start, end (time.time())
  defer  seconds: raise RetryLater on the first attempt
  limited  seconds: raise RateLimited(retry_after=seconds) the first time the task runs
  started  a Redis key the handler SETs as it starts (a test waits for it: the handler runs)
  block  seconds an async handler blocks its worker's event loop for as it starts (a handler
         that calls blocking code: the tasks taken with it start that much later)
Every handler also RPUSHes the record to "test:log:<queue>" (with the task's meta: a scheduled
run's schedule, tick and kind).
"""

import asyncio
import json
import os
import signal
import sys
import threading
import time

import redis

from queues import Queue, RateLimited, RetryLater, handler
from queues.engine.connection import get_default


def _directives(payload):
    try:
        d = json.loads(payload)
        return d if isinstance(d, dict) else {}
    except (ValueError, TypeError):
        return {}


def _record(task, start, outcome):
    rec = {
        "id": task.id,
        "queue": task.queue,
        "attempt": task.attempt,
        "pid": os.getpid(),
        "start": start,
        "end": time.time(),
        "outcome": outcome,
        "payload": task.payload.hex() if isinstance(task.payload, bytes) else task.payload,
        "bytes": isinstance(task.payload, bytes),
        "meta": task.meta,
        "batch": task.batch_id,
    }
    client = get_default().client
    client.rpush(f"test:log:{task.queue}", json.dumps(rec))
    d = _directives(task.payload) if isinstance(task.payload, str) else {}
    if d.get("log"):
        client.rpush(d["log"], json.dumps(rec))


def _fail_if_asked(task, d):
    fail = d.get("fail")
    if fail == "always" or (isinstance(fail, int) and task.attempt <= fail):
        raise ValueError(f"asked to fail on attempt {task.attempt}")
    if d.get("limited") and get_default().client.set(f"test:limited:{task.id}", 1, nx=True) is not None:
        raise RateLimited(retry_after=d["limited"])
    if (
        d.get("defer")
        and task.attempt == 1
        and get_default().client.set(f"test:deferred:{task.id}", 1, nx=True) is not None
    ):
        raise RetryLater(d["defer"])


def _say_started(d):
    if d.get("started"):
        get_default().client.set(d["started"], 1)


def run_sync(task):
    start = time.time()
    d = _directives(task.payload) if isinstance(task.payload, str) else {}
    _say_started(d)
    end = start + float(d.get("sleep", 0))
    while time.time() < end:
        if task.cancelled and not d.get("deaf"):
            _record(task, start, "cancelled")
            return
        time.sleep(0.01)
    try:
        _fail_if_asked(task, d)
    except Exception:
        _record(task, start, "raised")
        raise
    _record(task, start, "ok")


async def run_async(task):
    start = time.time()
    d = _directives(task.payload) if isinstance(task.payload, str) else {}
    _say_started(d)
    if d.get("block"):
        time.sleep(float(d["block"]))  # blocks the event loop, as blocking code in a coroutine does
    try:
        await asyncio.sleep(float(d.get("sleep", 0)))
    except asyncio.CancelledError:
        _record(task, start, "cancelled")
        raise
    try:
        _fail_if_asked(task, d)
    except Exception:
        _record(task, start, "raised")
        raise
    _record(task, start, "ok")


for name in ("t1", "t2", "t3", "t4", "t5", "t6", "d1", "high", "mid", "low", "locks", "priority", "sched"):
    handler(name)(run_sync)
for name in ("a1", "a2", "a3"):
    handler(name)(run_async)
handler("retries", retries=3, backoff=0.3)(run_sync)
handler("timeouts", timeout=1, retries=1, backoff=0.1)(run_sync)
handler("atimeouts", timeout=1, retries=1, backoff=0.1)(run_async)
handler("bylock", lock=lambda task: task.payload.split(":")[0])(run_sync)
handler("stuck", timeout=2, retries=2, backoff=0.1)(run_sync)


# -- task controls (tests/test_controls_workers.py) ----------------------------------------------

for name in ("ctl-th", "ctl-db", "ctl-rl", "ctl-ex", "vault"):
    handler(name)(run_sync)


# -- limits (tests/test_limits_workers.py) -------------------------------------------------------


def customer_of(task):
    """The partition of a limits test's task: its payload's "c"."""
    return str(_directives(task.payload).get("c", "none"))


handler("lim-conc", concurrency=2)(run_sync)
handler("lim-rate", rate=(5, 2))(run_sync)
handler("lim-arate", rate=(2, 1))(run_async)
handler("lim-fair", partition=customer_of, partition_concurrency=1)(run_sync)
handler("lim-kill", concurrency=2)(run_sync)
handler("lim-set", concurrency=1)(run_sync)
handler("lim-keep", concurrency=1, timeout=1, retries=0)(run_sync)
handler("lim-pkeep", partition=customer_of, partition_concurrency=1, timeout=1, retries=0)(run_sync)


# -- isolated handlers (tests/test_isolation.py, tests/test_processes.py) -------------------------


def run_isolated(task):
    """run_sync's directives, plus (in its own process):
    spin      loop on the CPU forever, never looking at task.cancelled
    linger    sleep forever; on the way out (SIGTERM), RPUSH task.cancelled to test:cleanup:<id>
    stubborn  ignore SIGTERM, then sleep forever (only SIGKILL ends it)
    crash     "segfault", or an exit code for os._exit
    hog       MB of memory to allocate and keep for the process's life
    after     a task id: RPUSH to test:alive:<id> whether that task's process still exists
    orm       count the users through Django's ORM (RPUSHed to test:orm:<id>)
    span      make an OpenTelemetry span of its own, named so
    It first RPUSHes its pid to test:pid:<id>."""
    d = _directives(task.payload) if isinstance(task.payload, str) else {}
    client = get_default().client
    client.rpush(f"test:pid:{task.id}", os.getpid())
    if d.get("hog"):
        _kept.append(b"x" * (int(d["hog"]) * 2**20))
    if d.get("after"):
        other = int(client.lindex(f"test:pid:{d['after']}", -1))
        client.rpush(f"test:alive:{task.id}", int(_exists(other)))
    if d.get("orm"):
        from django.contrib.auth.models import User

        client.rpush(f"test:orm:{task.id}", User.objects.count())
    if d.get("span"):
        from opentelemetry import trace

        with trace.get_tracer("tests").start_as_current_span(d["span"]):
            pass
    if d.get("crash") == "segfault":
        import ctypes

        ctypes.string_at(0)
    elif d.get("crash") is not None:
        os._exit(int(d["crash"]))
    if d.get("stubborn"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    if d.get("linger"):
        try:
            while True:
                time.sleep(1)
        finally:
            client.rpush(f"test:cleanup:{task.id}", int(task.cancelled))
    if d.get("spin"):
        while True:
            pass
    run_sync(task)
    return f"ran in {os.getpid()}"


def _exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_kept = []

for name in ("p1", "p2", "p3"):
    handler(name, isolation="process")(run_isolated)
handler("pspin", isolation="process", timeout=2)(run_isolated)
handler("pcrash", isolation="process", retries=1, backoff=0.1)(run_isolated)
handler("plock", isolation="process", timeout=1, lock="one")(run_isolated)
handler("pthread", isolation="thread")(run_sync)  # stays on a thread under --isolation process
handler("ctl-rl-iso", isolation="process")(run_isolated)  # RateLimited from a handler process


def run_counting_inits(task):
    """Records (RPUSH to test:init:<id>) this process's pid and how many times it ran the isolated
    processes' initializer (the worker command's ``child_init``, which sets Django up)."""
    from queues.management.commands import worker

    get_default().client.rpush(f"test:init:{task.id}", json.dumps([os.getpid(), worker.child_inits]))


handler("pinit", isolation="process")(run_counting_inits)


# -- Reporting handlers (tests/test_progress.py, the dashboard's browser tests) -----------------
# Directives: steps (default 3); gate true: before each step wait for an item on the list
# test:gate:<id> (else pause: seconds per step); fail true: raise after the last step. Each step
# logs "step i of n" and reports progress i/n with the message "did i of n".

#: How long a gated step waits for its item at most (then it goes on, as if given one).
GATE_WAIT = 60.0


def _wait_gate(task):
    """Wait for an item on test:gate:<id>: BLPOPs of 1 s each, under the client's socket timeout
    (5 s), so a test that opens the gate late on a loaded machine never breaks the connection."""
    client, deadline = get_default().client, time.monotonic() + GATE_WAIT
    while time.monotonic() < deadline and client.blpop(f"test:gate:{task.id}", timeout=1) is None:
        pass


def run_reporting(task):
    d = _directives(task.payload)
    start, steps = time.time(), int(d.get("steps", 3))
    for i in range(1, steps + 1):
        if d.get("gate"):
            _wait_gate(task)
        else:
            time.sleep(float(d.get("pause", 0)))
        task.log(f"step {i} of {steps}")
        task.progress(i / steps, f"did {i} of {steps}")
    if d.get("fail"):
        raise ValueError("failed after its steps")
    _record(task, start, "ok")


async def run_reporting_async(task):
    d = _directives(task.payload)
    start, steps = time.time(), int(d.get("steps", 3))
    for i in range(1, steps + 1):
        if d.get("gate"):
            await asyncio.to_thread(_wait_gate, task)
        else:
            await asyncio.sleep(float(d.get("pause", 0)))
        task.log(f"step {i} of {steps}")
        task.progress(i / steps, f"did {i} of {steps}")
    if d.get("fail"):
        raise ValueError("failed after its steps")
    _record(task, start, "ok")


handler("prog", retries=0)(run_reporting)
handler("aprog", retries=0)(run_reporting_async)
handler("pprog", retries=0, isolation="process")(run_reporting)


# -- Stress handlers (tests/test_stress_*.py) ------------------------------------------------
# Each run logs two events to "test:log:<queue>" (read them with tests.stress.events): "start" as
# the handler begins and "end" as it returns, raises or is cancelled, each with id, attempt, pid
# and t (time.time()). "start" also has running (handlers of the queue running in this process at
# that moment, this one included) and waited (seconds since Redis recorded the start: how long the
# task waited in the worker before a thread took it). Payload directives (a JSON object):
#   sleep          seconds to run, or a list of seconds per attempt (the last one repeats)
#   ignore_cancel  true: run on after a cancel or timeout (a sync handler that never looks, an
#                  async one that swallows CancelledError)
#   fail           "always", or the number of first attempts that raise
#   lock           the lock key (queues "stlock" and "stalock", whose handlers take it from here)

_running = {}
_running_guard = threading.Lock()


def _retrying(call):
    """Redis may refuse new connections for a while (a test lowers maxclients): keep trying."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return call()
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _event(task, ev, **extra):
    rec = {"ev": ev, "id": task.id, "attempt": task.attempt, "pid": os.getpid(), "t": time.time(), **extra}
    _retrying(lambda: get_default().client.rpush(f"test:log:{task.queue}", json.dumps(rec)))


def _seconds(value, attempt):
    if isinstance(value, list):
        return float(value[min(max(attempt, 1), len(value)) - 1]) if value else 0.0
    return float(value or 0)


def _begin(task):
    with _running_guard:
        _running[task.queue] = running = _running.get(task.queue, 0) + 1
    now = time.time()
    held = _retrying(lambda: Queue(task.queue).get(task.id))
    waited = now - held.started_at.timestamp() if held is not None and held.started_at else None
    _event(task, "start", running=running, waited=waited)
    return _directives(task.payload) if isinstance(task.payload, str) else {}


def _end(task, outcome):
    with _running_guard:
        _running[task.queue] -= 1
    _event(task, "end", outcome=outcome, cancelled=task.cancelled)


def _maybe_fail(task, d):
    fail = d.get("fail")
    if fail == "always" or (isinstance(fail, int) and task.attempt <= fail):
        raise ValueError(f"asked to fail on attempt {task.attempt}")


def stress_sync(task):
    d = _begin(task)
    outcome = "raised"
    try:
        end = time.time() + _seconds(d.get("sleep"), task.attempt)
        while time.time() < end:
            if task.cancelled and not d.get("ignore_cancel"):
                outcome = "cancelled"
                return
            time.sleep(0.005)
        _maybe_fail(task, d)
        outcome = "ok"
    finally:
        _end(task, outcome)


async def stress_async(task):
    d = _begin(task)
    outcome = "raised"
    try:
        seconds = _seconds(d.get("sleep"), task.attempt)
        if d.get("ignore_cancel"):
            sleeper = asyncio.ensure_future(asyncio.sleep(seconds))
            while not sleeper.done():
                try:
                    await asyncio.shield(sleeper)
                except asyncio.CancelledError:
                    pass
        else:
            await asyncio.sleep(seconds)
        _maybe_fail(task, d)
        outcome = "ok"
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        _end(task, outcome)


for name in ("st1", "st2", "st3", "st4"):
    handler(name)(stress_sync)
for name in ("sta1", "sta2"):
    handler(name)(stress_async)


def _lock_of(task):
    return str(_directives(task.payload).get("lock", "none"))


handler("stlock", timeout=1, lock=_lock_of)(stress_sync)
handler("stalock", timeout=1, lock=_lock_of)(stress_async)


def record_run_to_file(task):
    """The failover tests' handler: appends "<payload> <time>" to a file of its own (one per
    worker process, under WORQR_TEST_RUNS_DIR), never to the Redis being failed over."""
    path = os.path.join(os.environ["WORQR_TEST_RUNS_DIR"], f"{os.getpid()}.runs")
    time.sleep(0.005)
    with open(path, "a") as f:
        f.write(f"{task.payload} {time.time():.3f}\n")


handler("fo")(record_run_to_file)


# -- Fault stress handlers (tests/test_stress_faults.py) -----------------------------------------
# The workers of the fault suite talk to a Redis that is faulted (restarted, its connections
# killed); each run logs "start" and "end" (id, attempt, lease, pid, t, lock; "end" also outcome)
# to the list "test:flog:<queue>" of the Redis at WORQR_TEST_LOG_URL, which no fault touches, so
# the log is whole whatever happened to the queue's Redis ("start" also has the task's meta: a
# scheduled run's schedule and tick). Payload: {"sleep": s, "lock": key}.

_flog_client = None


def _flog(task, ev, d, **extra):
    global _flog_client
    if _flog_client is None:
        _flog_client = redis.Redis.from_url(os.environ["WORQR_TEST_LOG_URL"])
    rec = {"ev": ev, "id": task.id, "attempt": task.attempt, "lease": task.lease, "pid": os.getpid()}
    rec.update(t=time.time(), lock=d.get("lock"), **extra)
    _retrying(lambda: _flog_client.rpush(f"test:flog:{task.queue}", json.dumps(rec)))


def fault_sync(task):
    d = _directives(task.payload)
    _flog(task, "start", d, meta=task.meta)
    outcome = "ok"
    end = time.time() + float(d.get("sleep", 0))
    while time.time() < end:
        if task.cancelled:
            outcome = "cancelled"
            break
        time.sleep(0.005)
    _flog(task, "end", d, outcome=outcome)


async def fault_async(task):
    d = _directives(task.payload)
    _flog(task, "start", d, meta=task.meta)
    try:
        await asyncio.sleep(float(d.get("sleep", 0)))
    except asyncio.CancelledError:
        _flog(task, "end", d, outcome="cancelled")
        raise
    _flog(task, "end", d, outcome="ok")


handler("sf", retries=0)(fault_sync)
handler("sfa", retries=0)(fault_async)

# The generator handlers (tests/test_checkpoints.py) and the chunk handlers (tests/test_chunks.py).
from . import checkpoint_tasks, chunk_tasks  # noqa: E402,F401


@handler("pool-gate")
def pool_gate(task):
    """Waits in BLPOP on "test:gate" through the worker's own sync client: one connection per
    running task, as a handler that holds a Redis call open (tests/test_connections.py)."""
    get_default().client.blpop("test:gate", timeout=60)


# -- SystemExit and KeyboardInterrupt raised by async handlers (tests/test_lifecycle.py) -----------


def _exit_if_asked(payload):
    if payload == "exit":
        sys.exit(3)
    if payload == "kbd":
        raise KeyboardInterrupt


async def exits_async(task):
    await asyncio.sleep(0)
    _exit_if_asked(task.payload)


async def exits_async_chunk(tasks):
    await asyncio.sleep(0)
    for t in tasks:
        _exit_if_asked(t.payload)


handler("aexit", retries=0)(exits_async)
handler("aexit-chunk", chunk=3, chunk_wait=0.3, retries=0)(exits_async_chunk)


# -- return values and exceptions whose str() raises (tests/test_lifecycle.py) ---------------------


class Unprintable:
    def __str__(self):
        raise ValueError("no text for this")


class UnprintableError(Exception):
    def __str__(self):
        raise ValueError("no text for this error")


def unprintable(task):
    if task.payload == "result":
        return Unprintable()
    if task.payload == "error":
        raise UnprintableError()
    return "fine"


async def unprintable_async(task):
    return unprintable(task)


handler("unprintable", keep_result=True, retries=0)(unprintable)
handler("aunprintable", keep_result=True, retries=0)(unprintable_async)
handler("punprintable", keep_result=True, retries=0, isolation="process")(unprintable)


# -- a sync handler that returns a coroutine (tests/test_lifecycle.py) --------------------------------


async def _hidden_async(task_or_tasks):
    get_default().client.rpush("test:hidden-async-ran", "1")


def returns_coroutine(task_or_tasks):
    """Sync, yet returns a coroutine: what a decorator without functools.wraps makes of an async def."""
    return _hidden_async(task_or_tasks)


handler("hidden-async", retries=0)(returns_coroutine)
handler("hidden-async-chunk", chunk=3, chunk_wait=0.3, retries=0)(returns_coroutine)
handler("phidden-async", retries=0, isolation="process")(returns_coroutine)


# -- kept results: their size and their text (tests/test_results.py) ---------------------------------


def sized_result(task):
    """The payload says what to return: "<n>" n bytes of text, "surrogate" a lone surrogate."""
    if task.payload == "surrogate":
        return "a\ud800b"
    if task.payload == "escaped":
        return b"\xff\xfe".decode("utf-8", "surrogateescape")
    if task.payload.startswith("é"):
        return "é" * int(task.payload[1:])
    return "x" * int(task.payload)


async def sized_result_async(task):
    return sized_result(task)


handler("results", keep_result=True, retries=0)(sized_result)
handler("aresults", keep_result=True, retries=0)(sized_result_async)
handler("presults", keep_result=True, retries=0, isolation="process")(sized_result)


def surrogate_texts(task):
    """Surrogates in the error, and (payload "report") in the progress message and a log line."""
    if task.payload == "report":
        task.progress(0.5, "half \ud800 way")
        task.log("a \udcff line \ud800")
    raise ValueError("bad \ud800 text")


async def surrogate_texts_async(task):
    return surrogate_texts(task)


handler("surrogates", retries=0)(surrogate_texts)
handler("asurrogates", retries=0)(surrogate_texts_async)
handler("psurrogates", retries=0, isolation="process")(surrogate_texts)
