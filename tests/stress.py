"""Helpers of the stress tests (tests/test_stress_*.py): the events the stress handlers of
tests/testapp/tasks.py log, a pub/sub killer, CLIENT LIST and SLOWLOG readers, and the soak switch.

Everything here uses public interfaces only: ``Queue``, ``queues.engine.readmodel``, the records
the handlers write, and Redis commands that do not depend on worqr's key layout.
"""

import json
import os
import random
import threading
import time
from collections import Counter, defaultdict

import pytest
import redis

#: WORQR_SOAK=1 runs the long versions (minutes each); ``make test`` runs the short ones.
SOAK = os.environ.get("WORQR_SOAK", "") not in ("", "0")

#: The marks of every stress test: ``-m stress`` selects them, ``-m "not stress"`` skips them;
#: a soak run lifts the suite's per-test timeout.
MARKS = [pytest.mark.stress, *([pytest.mark.timeout(3600)] if SOAK else [])]


def scaled(short, soak):
    """``short`` in a normal run, ``soak`` with WORQR_SOAK=1."""
    return soak if SOAK else short


def events(client, queue, ev=None):
    """The stress handlers' events for ``queue``, oldest first (only ``ev`` ones if given)."""
    out = [json.loads(r) for r in client.lrange(f"test:log:{queue}", 0, -1)]
    return [e for e in out if ev is None or e["ev"] == ev]


def runs(client, queue):
    """{(id, attempt): [run, ...]}, each run a dict with start, end (None while running), pid,
    outcome, waited and running (from its start event)."""
    open_runs, out = {}, defaultdict(list)
    for e in events(client, queue):
        key = (e["id"], e["attempt"], e["pid"])
        if e["ev"] == "start":
            run = {
                "id": e["id"],
                "attempt": e["attempt"],
                "pid": e["pid"],
                "start": e["t"],
                "end": None,
                "outcome": None,
                "waited": e.get("waited"),
                "running": e.get("running"),
            }
            open_runs.setdefault(key, []).append(run)
            out[(e["id"], e["attempt"])].append(run)
        else:
            pending = open_runs.get(key)
            if pending:
                run = pending.pop(0)
                run["end"], run["outcome"] = e["t"], e["outcome"]
    return out


def starts_per_id(client, queue):
    """Counter: task id -> how many times its handler started (any attempt)."""
    return Counter(e["id"] for e in events(client, queue, "start"))


def overlapping(spans):
    """The pairs of (start, end, label) spans that overlap in time (an open span runs to now),
    as text with times in seconds from the earliest start."""
    now = time.time()
    spans = sorted((s, e if e is not None else now, label) for s, e, label in spans)
    t0 = spans[0][0] if spans else 0
    bad = []
    for i, (s1, e1, l1) in enumerate(spans):
        for s2, e2, l2 in spans[i + 1 :]:
            if s2 >= e1:
                break
            bad.append(f"{l1} ran {s1 - t0:.2f}-{e1 - t0:.2f} s and {l2} {s2 - t0:.2f}-{e2 - t0:.2f} s")
    return bad


def wait_until(predicate, timeout, interval=0.05):
    """Poll ``predicate`` until it is truthy (returns True) or ``timeout`` seconds pass (False);
    for tests that report what did not happen along with other findings."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def wait_beats(client, names, beats=2, timeout=15.0):
    """Wait until each worker in ``names`` has sent ``beats`` more heartbeats (its heartbeat age,
    from readmodel.workers, went down that many times); returns the names of those that did not
    within ``timeout`` seconds. Redis errors count as "not yet"."""
    from queues.engine import readmodel

    seen = dict.fromkeys(names, 0)
    last = {}
    deadline = time.monotonic() + timeout
    while min(seen.values()) < beats and time.monotonic() < deadline:
        try:
            ages = {w["name"]: w["heartbeat_age"] for w in readmodel.workers(client)}
        except redis.RedisError:
            ages = {}
        for name, age in ages.items():
            if name in seen and name in last and age < last[name]:
                seen[name] += 1
            last[name] = age
        time.sleep(0.05)
    return [name for name, n in seen.items() if n < beats]


def wait_ready(client, name, listening=1):
    """Wait until worker ``name`` is registered and ``listening`` workers are subscribed to their
    control channels, then a moment more for it to take stock: a task enqueued before that can be
    handed over while the worker is not yet listening (tested on its own in test 1)."""
    from tests.conftest import wait_registered

    wait_registered(client, name)
    wait_for_count = time.monotonic() + 15
    while len(subscribed_clients(client)) < listening:
        if time.monotonic() > wait_for_count:
            pytest.fail(f"timed out waiting for {listening} worker(s) to listen")
        time.sleep(0.02)
    time.sleep(0.2)


def subscribed_clients(client):
    """Clients of this Redis subscribed to at least one channel (CLIENT LIST)."""
    return [c for c in client.client_list() if int(c.get("sub", 0)) + int(c.get("psub", 0)) > 0]


class PubSubKiller:
    """A thread that kills every pub/sub connection (CLIENT KILL TYPE pubsub) every
    ``low``..``high`` seconds, at random, until stopped; ``kills`` counts the rounds."""

    def __init__(self, url, low=0.03, high=0.15, seed=None):
        self.client = redis.Redis.from_url(url)
        self.low, self.high = low, high
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.kills = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_event.wait(self.rng.uniform(self.low, self.high)):
            self.client.client_kill_filter(_type="pubsub")
            self.kills += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(5)
        self.client.close()


class Tolerant:
    """Wraps predicates polled while Redis may be blocked by a long script: an error (BUSY, a
    timeout) counts as "not yet" and is kept in ``errors`` for the report."""

    def __init__(self):
        self.errors = []

    def __call__(self, predicate):
        def wrapped():
            try:
                return predicate()
            except redis.RedisError as exc:
                self.errors.append(str(exc)[:120])
                time.sleep(0.05)
                return False

        return wrapped


#: Commands that do constant work: one of them logged slower than the threshold means the Redis
#: process was not running (a loaded machine descheduled it), not that the command was slow.
CONSTANT_TIME = {
    "HSET",
    "HGET",
    "HMGET",
    "HDEL",
    "HEXISTS",
    "HINCRBY",
    "HINCRBYFLOAT",
    "HSETNX",
    "GET",
    "SET",
    "DEL",
    "EXISTS",
    "INCR",
    "PEXPIRE",
    "PTTL",
    "RPUSH",
    "LPUSH",
    "LPOP",
    "RPOP",
    "LLEN",
    "SADD",
    "SREM",
    "SPOP",
    "SCARD",
    "SISMEMBER",
    "ZADD",
    "ZREM",
    "ZSCORE",
    "ZCARD",
    "TIME",
    "PUBLISH",
    "UNLINK",
}


def _words(entry):
    cmd = entry["command"]
    text = cmd.decode("utf-8", "replace") if isinstance(cmd, bytes) else str(cmd)
    return text, text.split(" ")


class RedisStalls:
    """How much the machine held the test redis-server back, read from outside it: a thread reads
    the server's main thread's ``/proc/<pid>/task/<pid>/schedstat`` (nanoseconds on a CPU, and
    runnable but waiting for one) every 50 ms, each time right after asking the server for the id
    of its newest SLOWLOG entry. A SLOWLOG entry carries its start only to the second; the first
    sample that saw its id places its end to within one sampling interval. Over the stretch from
    its start to that sample Redis ran for ``share`` of the time it wanted a CPU; a command that
    took ``d`` of wall time did about ``d * share`` of its own work. Without /proc (or a local pid)
    the share is 1: wall time counts.

    The scripts this process runs (``scripts.run``: a test's enqueue, purge, drop ...) are also
    timed one by one: the server's CPU time from just before the call to just after its reply
    bounds the work the script did, however long the machine kept it waiting (``explains``)."""

    EVERY = 0.05

    def __init__(self, client):
        self.samples, self.path, self.client, self.calls = [], None, client, []
        self._unwrap = None
        try:
            pid = int(client.info("server")["process_id"])
            path = f"/proc/{pid}/task/{pid}/schedstat"
            open(path).read()
            self.path = path
        except (KeyError, TypeError, ValueError, OSError, redis.RedisError):
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="redis-stalls")
        self._thread.start()
        self._time_scripts()

    def _ran_ns(self):
        return self._read()[1]

    def _time_scripts(self):
        from queues.engine import scripts

        real = scripts.run

        def timed(client, name, *args, **kwargs):
            ran, began = self._ran_ns(), time.perf_counter()
            try:
                return real(client, name, *args, **kwargs)
            finally:
                wall = time.perf_counter() - began
                self.calls.append((name, time.time(), int(wall * 1e6), (self._ran_ns() - ran) // 1000))

        scripts.run = timed
        self._unwrap = lambda: setattr(scripts, "run", real)

    def explains(self, name, entry, over_us, used):
        """True if a call of script ``name`` from this process (one not in ``used``, then added to
        it) can hold the SLOWLOG ``entry``: its reply came after the entry was logged, it waited
        at least the entry's duration, and the server spent at most ``over_us`` of CPU time on
        anything meanwhile. That execution of the script then did at most ``over_us`` of work."""
        for i, (called, ended, wall_us, ran_us) in enumerate(self.calls):
            if (
                i not in used
                and called == name
                and wall_us >= entry["duration"]
                and ran_us <= over_us
                and entry["start_time"] <= ended <= entry["start_time"] + 1 + wall_us / 1e6
            ):
                used.add(i)
                return True
        return False

    def _newest_id(self):
        try:
            newest = self.client.slowlog_get(1)
        except redis.RedisError:
            return None
        return newest[0]["id"] if newest else -1

    def _read(self, newest=None):
        ran, waited = open(self.path).read().split()[:2]
        return time.time(), int(ran), int(waited), newest

    def _sample(self):
        while not self._stop.is_set():
            newest = self._newest_id()  # answered once the command running now has ended
            try:
                self.samples.append(self._read(newest))
            except OSError:  # the server is gone
                return
            self._stop.wait(self.EVERY)

    def stop(self):
        if self._unwrap is not None:
            self._unwrap()
            self._unwrap = None
        if self.path:
            self._stop.set()
            self._thread.join(timeout=5)

    def _span(self, samples, start, end):
        before = [x for x in samples if x[0] <= start] or samples[:1]
        after = [x for x in samples if x[0] >= end] or samples[-1:]
        if not before or not after:
            return 1.0
        ran, waited = after[0][1] - before[-1][1], after[0][2] - before[-1][2]
        return ran / (ran + waited) if ran > 0 else 1.0

    def snapshot(self):
        """The samples so far and one taken now: what share_of reads (take it once per SLOWLOG read)."""
        samples = list(self.samples)
        if self.path:
            try:
                samples.append(self._read(self._newest_id()))
            except OSError:
                pass
        return samples

    def share_of(self, entry, samples):
        """The share of CPU Redis had while the SLOWLOG ``entry`` ran, from ``samples`` (a
        snapshot): from the sample before its end less its duration to the first sample that saw
        it (its end as SLOWLOG stamps it, to the second, when no sample saw it)."""
        if not self.path:
            return 1.0
        took = entry["duration"] / 1e6
        seen = next((i for i, x in enumerate(samples) if x[3] is not None and x[3] >= entry["id"]), None)
        if seen is None:
            return self._span(samples, entry["start_time"] - took, entry["start_time"] + 1)
        end = samples[seen][0]
        before = next((x[0] for x in reversed(samples[:seen]) if x[3] is not None), end - self.EVERY)
        return self._span(samples, before - took, end)


def slow_commands(client, over_us, stalls=None):
    """SLOWLOG entries slower than ``over_us`` microseconds: [(µs, command)], slowest first.

    What counts is the work a command did: Redis 7 also logs the commands a script runs, so a
    script's time is its logged duration minus that of the constant-time commands inside it that
    were logged as slow (the machine stalling Redis meanwhile, not the script working); such
    commands are not reported themselves. With ``stalls`` (a RedisStalls running meanwhile) a
    command's time is also at most its duration times the share of CPU time Redis had while it
    ran (RedisStalls.share_of), whichever is less, and a script this process ran counts no more
    than the server's CPU time over the call (RedisStalls.explains): a loaded machine slows a
    bounded script down, it does not make it do more. A script call is named by its script."""
    entries = sorted(client.slowlog_get(10000), key=lambda e: e["id"])
    samples = stalls.snapshot() if stalls is not None else []
    out, nested, used = [], [], set()

    def own(entry, stalled=0):
        if stalls is None:
            return entry["duration"] - stalled
        return min(entry["duration"] - stalled, int(entry["duration"] * stalls.share_of(entry, samples)))

    for entry in entries:
        text, words = _words(entry)
        name = words[0].upper()
        if name == "SLOWLOG":  # a RedisStalls asking for the newest entry
            continue
        if name in ("EVALSHA", "EVAL"):
            stalled = sum(e["duration"] for e in nested if _words(e)[1][0].upper() in CONSTANT_TIME)
            nested = []
            if (took := own(entry, stalled)) > over_us:
                script = _script_names().get(words[1], words[1]) if len(words) > 1 else None
                if script and stalls is not None and stalls.explains(script, entry, over_us, used):
                    continue  # the server's CPU time over the call bounds its work
                if script:
                    text = f"script {script}"
                out.append((took, text[:120]))
        else:
            nested.append(entry)
            if name not in CONSTANT_TIME and (took := own(entry)) > over_us:
                out.append((took, text[:120]))
    return sorted(out, reverse=True)


def describe_slow(slow, limit=8):
    return "; ".join(f"{us / 1000:.1f} ms {cmd}" for us, cmd in slow[:limit])


def _script_names():
    try:  # best effort: the engine's script loader is being rewritten
        from queues.engine import scripts

        return {s.sha: name for name, s in scripts.load_all().items()}
    except Exception:
        return {}
