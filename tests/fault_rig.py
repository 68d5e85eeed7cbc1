"""The fault suite's rig (tests/test_stress_faults.py): a private redis-server with AOF
(``appendfsync always``) that the faults strike, real worker processes on it whose handlers log
every run to the session's Redis (which no fault touches), a producer, the faults themselves, and
the reading of the run log into findings.

Faults (``FAULTS``): each runs on a thread of its own, striking every ``lo``..``hi`` seconds (at
random, seeded) until the rig stops:

- ``conn``: CLIENT KILL of every normal (not pub/sub) connection but the rig's own;
- ``pubsub``: CLIENT KILL of every pub/sub connection but the rig's own;
- ``restart``: kill -9 of Redis, started again on its append-only file so that it is down for
  0.5 to 8 s (``outage``);
- ``kill9``: kill -9 of a worker (a new worker, under a new name, replaces it);
- ``freeze``: SIGSTOP of a worker for HEARTBEAT_TTL + 1.5 s, then SIGCONT (it is reaped
  meanwhile, the others beating, and stops the tasks taken from it once thawed).

A task run again after a kill -9 or a freeze of the worker that ran it is told apart in the
findings (``twice_after``, by kind) from one run twice without (``twice``: a failure); so is an
overlap of two runs of a lock, one of them a frozen worker's (``overlaps_after_freeze``).

A new kind is a ``Fault`` subclass with its ``kind`` and ``strike()``, added to ``FAULTS``.

The producer is struck too: its connection is killed with the workers' and Redis restarts under
its enqueues. An enqueue that raises ``RedisUnavailable`` leaves its ``unknown`` ids (sent, no
reply) unsure: the producer sends each again with ``enqueue_many(ids=...)``, as the README tells
a caller to, until one answers, and then counts it acknowledged. So an acknowledged task run twice
or never is a failure whatever happened to the reply of its first enqueue.
"""

import json
import os
import random
import signal
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import redis

from queues import Queue
from queues.engine import keys
from queues.engine.connection import Connection
from queues.engine.errors import RedisUnavailable
from queues.testing import RedisServer
from tests.conftest import ARTIFACTS
from tests.stress import overlapping

#: Client names of the rig's own connections (CLIENT SETNAME): the faults spare them.
RIG = "rig-"


def _rig_client(url, name):
    return redis.Redis.from_url(url, client_name=RIG + name, socket_timeout=5, socket_connect_timeout=1)


class Fault(threading.Thread):
    """One kind of fault, struck every ``every`` = (lo, hi) seconds until the rig stops; ``count``
    strikes done (those that found Redis down are not counted)."""

    kind = ""

    def __init__(self, rig, every, seed):
        super().__init__(daemon=True, name=f"fault-{self.kind}")
        self.rig, self.every, self.rng = rig, every, random.Random(seed)
        self.count = 0
        self.detail = Counter()

    def run(self):
        while not self.rig.stop_faults.wait(self.rng.uniform(*self.every)):
            try:
                if self.strike() is not False:
                    self.count += 1
            except (redis.RedisError, OSError):
                pass  # Redis is down (a restart): try again at the next strike

    def strike(self):
        raise NotImplementedError


class _Kills(Fault):
    """CLIENT KILL of every connection of one type but the rig's own."""

    type = ""

    def __init__(self, *args):
        super().__init__(*args)
        self.client = _rig_client(self.rig.url, f"killer-{self.kind}")

    def strike(self):
        doomed = [
            (c["id"], c["name"]) for c in self.client.client_list(_type=self.type) if not c["name"].startswith(RIG)
        ]
        for client_id, name in doomed:
            killed = self.client.client_kill_filter(_id=client_id)
            self.detail["connections"] += killed
            if name == "producer":
                self.detail["producer's"] += killed
        return bool(doomed)


class ConnKills(_Kills):
    kind, type = "conn", "normal"


class PubSubKills(_Kills):
    kind, type = "pubsub", "pubsub"


class Restarts(Fault):
    """kill -9 of Redis, restarted on its AOF; ``outages``: seconds from the kill until it answered."""

    kind = "restart"
    outage = (0.5, 8.0)

    def __init__(self, *args):
        super().__init__(*args)
        self.outages = []

    def strike(self):
        down = self.rng.uniform(*self.outage)
        began = time.monotonic()
        self.rig.server.kill()
        time.sleep(max(0.0, down - 0.1))  # (loading the AOF takes the rest)
        self.rig.server.start()
        self.outages.append(round(time.monotonic() - began, 2))


class WorkerKills(Fault):
    """kill -9 of a worker at random; a new worker replaces it."""

    kind = "kill9"

    def strike(self):
        name = self.rng.choice(sorted(self.rig.live))
        self.rig.kill9(name)


class Freezes(Fault):
    """SIGSTOP of a worker at random for HEARTBEAT_TTL + 1.5 s, then SIGCONT."""

    kind = "freeze"

    def strike(self):
        w = self.rig.live.get(self.rng.choice(sorted(self.rig.live)))
        if w is None:  # killed meanwhile
            return False
        began = time.time()
        w.signal(signal.SIGSTOP)
        time.sleep(self.rig.ttl + 1.5)
        w.signal(signal.SIGCONT)
        self.rig.frozen[w.pid].append((began, time.time()))


FAULTS = {f.kind: f for f in (ConnKills, PubSubKills, Restarts, WorkerKills, Freezes)}


@dataclass
class Run:
    queue: str
    id: str
    attempt: int
    lease: int
    pid: int
    start: float
    lock: str | None
    meta: dict | None = None  # a scheduled run's schedule, tick and kind
    end: float | None = None
    outcome: str | None = None


@dataclass
class Findings:
    acked: int = 0
    unacked: int = 0  # enqueues that certainly added nothing (not_added)
    unsure: int = 0  # ids whose enqueue raised with them unknown, each sent again until answered
    completed: int = 0
    lost: list = field(default_factory=list)
    twice_after: dict = field(default_factory=dict)  # tasks run again after a kill9 / freeze of their runner
    twice: list = field(default_factory=list)  # tasks run again without that
    overlaps_after_freeze: list = field(default_factory=list)
    overlaps: list = field(default_factory=list)
    reaped_live: list = field(default_factory=list)  # live workers presumed dead (events seen)
    reaped_logged: int = 0  # live workers' log lines saying they found their tasks taken
    faults: dict = field(default_factory=dict)
    outages: list = field(default_factory=list)
    left: dict = field(default_factory=dict)
    exited: list = field(default_factory=list)  # workers that exited by themselves

    def summary(self):
        """The figures, with at most 3 examples of each list."""
        return {
            k: (v[:3] + [f"... {len(v)} in all"] if isinstance(v, list) and len(v) > 3 else v)
            for k, v in self.__dict__.items()
        }

    def problems(self):
        out = []
        if self.lost:
            out.append(f"{len(self.lost)} acknowledged task(s) never completed: {self.lost[:3]}")
        if self.twice:
            out.append(f"{len(self.twice)} task(s) ran twice with no kill -9 of their runner: {self.twice[:3]}")
        if self.overlaps:
            out.append(f"{len(self.overlaps)} lock overlap(s): {self.overlaps[:3]}")
        if self.reaped_live or self.reaped_logged:
            out.append(f"live workers presumed dead: {self.reaped_live[:5]} ({self.reaped_logged} log lines)")
        if self.exited:
            out.append(f"workers exited by themselves: {self.exited}")
        if any(self.left.values()):
            out.append(f"left in the queues: {self.left}")
        return out


class Rig:
    """``Rig(start_worker, log_client, queues)``: ``start_worker`` is the ``workers`` fixture;
    ``log_client`` the session's Redis, where the handlers log."""

    def __init__(self, start_worker, log_client, queues, *, concurrency=3, seed=1, heartbeat_ttl=3.0):
        self.start_worker, self.log, self.queues = start_worker, log_client, list(queues)
        self.concurrency, self.ttl = concurrency, heartbeat_ttl
        self.rng = random.Random(seed)
        self.seed = seed
        self.server = RedisServer(appendfsync="always").start()
        self.url = self.server.url
        self.stop_faults, self.stop_producing = threading.Event(), threading.Event()
        self.live, self.procs = {}, {}  # name -> WorkerProcess (live ones; all of them)
        self.killed = {}  # pid -> time.time() of its kill -9
        self.frozen = defaultdict(list)  # pid -> [(SIGSTOP, SIGCONT) time.time()]
        self.acked, self.unacked = [], 0
        self.unsure = []  # (Queue, id, payload, lock) whose enqueue's reply was lost
        self.unsure_seen = 0
        self.reaped = []  # (name, when heard, deadline missed in ms) of the 'worker_failed' events
        self.faults, self.threads = [], []
        self.generation = 0
        self.direct = _rig_client(self.url, "reader")
        self._reading = threading.Lock()
        self._read, self._runs, self._open, self._done = {}, defaultdict(list), {}, set()

    # -- processes -----------------------------------------------------------------------------

    def add_worker(self, url=None, concurrency=None, settings="tests.settings", env=None):
        """Start a worker of the rig's queues (on ``url``, the rig's Redis by default)."""
        self.generation += 1
        name = f"sfw-{self.generation}"
        env = {
            "WORQR_REDIS_URL": url or self.url,
            "WORQR_TEST_LOG_URL": os.environ["WORQR_REDIS_URL"],  # the session's Redis (conftest)
            "WORQR_TEST_HEARTBEAT_TTL": str(self.ttl),
            **(env or {}),
        }
        w = self.start_worker(
            self.queues, concurrency=concurrency or self.concurrency, name=name, grace=1, env=env, settings=settings
        )
        self.live[name] = self.procs[name] = w
        return w

    def kill9(self, name):
        w = self.live.pop(name)
        self.killed[w.pid] = time.time()
        w.kill()
        self.add_worker()

    def producer(self, queue):
        """A Queue on the rig's Redis, through a connection the faults strike like the workers'."""
        return Queue(queue, Connection(f"{self.url}?client_name=producer"))

    def wait_serving(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                names = {
                    m.decode() for q in self.queues for m in self.direct.zrange(keys.queue_key(q, "workers"), 0, -1)
                }
                if set(self.live) <= names:
                    return
            except redis.RedisError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"workers {sorted(set(self.live))} did not all register within {timeout} s")

    # -- the run -------------------------------------------------------------------------------

    def start(self, faults, workers=3, rate=60.0, sleep=(0.0, 0.4), locks=4, locked=0.4):
        """Start ``workers`` workers, the producer (``rate`` tasks/s, each sleeping ``sleep``
        s, a share ``locked`` of them on one of ``locks`` lock keys), the observer and
        ``faults``: {kind: (lo, hi) seconds between strikes}."""
        for _ in range(workers):
            self.add_worker()
        self.wait_serving()
        self.threads = [
            threading.Thread(target=self._produce, args=(rate, sleep, locks, locked), daemon=True),
            threading.Thread(target=self._observe, daemon=True),
        ]
        self.faults = [FAULTS[kind](self, every, self.seed + i) for i, (kind, every) in enumerate(faults.items())]
        for t in [*self.threads, *self.faults]:
            t.start()

    def counts(self):
        return {f.kind: f.count for f in self.faults}

    def run_until(self, seconds=None, targets=None, limit=3600):
        """Let the faults strike for ``seconds``, or until each kind in ``targets`` struck that
        many times (at most ``limit`` seconds)."""
        began = time.monotonic()
        while time.monotonic() - began < limit:
            if seconds is not None and time.monotonic() - began >= seconds:
                break
            if targets is not None and all(self.counts().get(k, 0) >= n for k, n in targets.items()):
                break
            time.sleep(0.5)

    def finish(self, drain=120.0):
        """Stop the faults and the producer, wait until every acknowledged task ran and the
        queues are empty (at most ``drain`` s), and return the Findings."""
        self.stop_faults.set()
        for f in self.faults:
            f.join(30)
        if self.server.proc is None:
            self.server.start()
        self.stop_producing.set()
        self.threads[0].join(90)
        deadline = time.monotonic() + drain
        while time.monotonic() < deadline and (self._unfinished() or any(self._left().values())):
            time.sleep(0.5)
        time.sleep(1.0)  # the observer hears the last events
        return self.findings()

    def close(self):
        self.stop_faults.set()
        self.stop_producing.set()
        for w in self.procs.values():
            w.close()
        self.server.kill()
        self.direct.close()

    # -- producer and observer -----------------------------------------------------------------

    def _produce(self, rate, sleep, locks, locked):
        queues = [self.producer(q) for q in self.queues]
        rng = random.Random(self.seed * 7)
        while not self.stop_producing.is_set():
            self._send_unsure_again()
            q = rng.choice(queues)
            payload = {"sleep": round(rng.uniform(*sleep), 3)}
            lock = f"L{rng.randrange(locks)}" if rng.random() < locked else None
            if lock:
                payload["lock"] = lock
            try:
                self.acked.append(q.enqueue(json.dumps(payload), lock=lock))
            except RedisUnavailable as exc:
                self._note_unavailable(q, json.dumps(payload), lock, exc)
            time.sleep(rng.expovariate(rate))
        deadline = time.monotonic() + 60
        while self.unsure and time.monotonic() < deadline:
            self._send_unsure_again()
            time.sleep(0.2)

    def _note_unavailable(self, q, raw, lock, exc):
        self.acked.extend(exc.added)
        self.unacked += len(exc.not_added)
        self.unsure.extend((q, task_id, raw, lock) for task_id in exc.unknown)
        self.unsure_seen += len(exc.unknown)

    def _send_unsure_again(self):
        """Send each unsure id again with its payload (what a caller is told to do); an answer,
        whether it added the task or found it already there, makes it acknowledged."""
        while self.unsure:
            q, task_id, raw, lock = self.unsure[0]
            try:
                q.enqueue_many([raw], ids=[task_id], lock=lock)
            except RedisUnavailable:
                return  # still unsure: again at the next turn
            self.unsure.pop(0)
            self.acked.append(task_id)

    def _observe(self):
        """Note the workers reaped ('worker_failed' events), resubscribing after every fault."""
        channels = [keys.queue_events_channel(q) for q in self.queues]
        while not self.stop_producing.is_set() or self._unfinished():
            try:
                client = _rig_client(self.url, "observer")
                pubsub = client.pubsub()
                pubsub.subscribe(*channels)
                while True:
                    msg = pubsub.get_message(timeout=0.5)
                    if msg and msg["type"] == "message":
                        event = json.loads(msg["data"])
                        if event.get("e") == "worker_failed":
                            self.reaped.append((event["w"], time.time(), event.get("dl")))
                    if self.stop_producing.is_set() and not self._unfinished():
                        return
            except (redis.RedisError, OSError):
                time.sleep(0.05)

    # -- findings ------------------------------------------------------------------------------

    def runs(self):
        """{id: [Run, ...]} from the handlers' log (read on from where the last call stopped),
        runs in the order they started."""
        with self._reading:
            for q in self.queues:
                entries = self.log.lrange(f"test:flog:{q}", self._read.get(q, 0), -1)
                self._read[q] = self._read.get(q, 0) + len(entries)
                for raw in entries:
                    e = json.loads(raw)
                    key = (e["id"], e["lease"], e["pid"])
                    if e["ev"] == "start":
                        run = Run(q, e["id"], e["attempt"], e["lease"], e["pid"], e["t"], e["lock"], e.get("meta"))
                        self._open[key] = run
                        self._runs[e["id"]].append(run)
                        self._runs[e["id"]].sort(key=lambda r: r.start)
                    elif key in self._open:
                        run = self._open.pop(key)
                        run.end, run.outcome = e["t"], e["outcome"]
                        if run.outcome == "ok":
                            self._done.add(run.id)
            return self._runs

    def _unfinished(self):
        self.runs()
        return [i for i in self.acked if i not in self._done]

    def _left(self):
        try:
            left = Counter()
            for q in self.queues:
                c = Queue(q, Connection(self.url)).counts()
                left.update({k: c[k] for k in ("pending", "active", "delayed", "waiting") if c[k]})
            return dict(left)
        except redis.RedisError as exc:
            return {"unreadable": str(exc)}

    def findings(self):
        self.runs()
        with self._reading:  # (the observer may read on meanwhile)
            runs = {task_id: list(rs) for task_id, rs in self._runs.items()}
        f = Findings(acked=len(self.acked), unacked=self.unacked, unsure=self.unsure_seen)
        f.lost = [task_id for _, task_id, _, _ in self.unsure]  # never answered (listed as lost)
        f.completed = sum(1 for rs in runs.values() if any(r.outcome == "ok" for r in rs))
        f.lost += self._unfinished()
        killed_names = {name for name, w in self.procs.items() if w.pid in self.killed}
        frozen_names = {name for name, w in self.procs.items() if w.pid in self.frozen}
        after = Counter()
        for task_id, rs in runs.items():
            if len(rs) < 2:
                continue
            why = self._why_again(rs[:-1])
            if why:
                after[why] += 1
            else:
                f.twice.append(" / ".join(f"{r.pid} lease {r.lease} {r.outcome}" for r in rs) + f" ({task_id})")
        f.twice_after = dict(after)
        by_lock = defaultdict(list)
        for rs in runs.values():
            for r in rs:
                if r.lock:
                    end = r.end if r.end is not None else self.killed.get(r.pid)
                    label = f"{r.id} (pid {r.pid}{', frozen' if self._froze(r) else ''})"
                    by_lock[(r.queue, r.lock)].append((r.start, end, label))
        for spans in by_lock.values():
            for overlap in overlapping(spans):
                (f.overlaps_after_freeze if ", frozen)" in overlap else f.overlaps).append(overlap)
        f.reaped_live = [
            name
            for name, at, missed in self.reaped
            if name in self.procs and name not in killed_names and not self._froze_at(self.procs[name].pid, at, missed)
        ]
        f.reaped_logged = sum(
            w.output().count("presumed dead")
            for name, w in self.procs.items()
            if name not in killed_names and name not in frozen_names
        )
        f.faults = {x.kind: {"strikes": x.count, **x.detail} for x in self.faults}
        f.outages = [o for x in self.faults for o in getattr(x, "outages", ())]
        f.left = self._left()
        f.exited = [name for name, w in self.live.items() if w.proc.poll() is not None]
        return f

    def _why_again(self, earlier):
        """Why a task ran again after the ``earlier`` runs: 'kill9' or 'freeze' of the worker
        running one of them, or None (a failure of the guarantee)."""
        for r in earlier:
            if r.pid in self.killed and self.killed[r.pid] >= r.start:
                return "kill9"
        for r in earlier:
            if self._froze(r):
                return "freeze"
        return None

    def _froze(self, run):
        """Whether the worker of ``run`` was frozen while it ran (or just after: its report)."""
        end = run.end if run.end is not None else float("inf")
        return any(began <= end + 2.0 and run.start <= thawed for began, thawed in self.frozen.get(run.pid, ()))

    def _froze_at(self, pid, at, missed=None):
        """Whether worker ``pid`` was reaped for a freeze: the deadline it missed (``missed``, ms,
        from the event) fell between its SIGSTOP and its SIGCONT, so it had not beaten since it
        thawed (on a loaded machine, with its connections cut, that can be seconds after the thaw);
        without it, whether the reap was heard (at ``at``) while frozen or at most a TTL + 2 s
        after the thaw."""
        spans = self.frozen.get(pid, ())
        if missed is not None:
            return any(began - 0.5 <= missed / 1000 <= thawed + 0.5 for began, thawed in spans)
        return any(began <= at <= thawed + self.ttl + 2.0 for began, thawed in spans)

    def report(self, name, findings):
        """Write the findings as JSON to test-artifacts/faults-<name>.json."""
        ARTIFACTS.mkdir(exist_ok=True)
        data = dict(findings.__dict__, problems=findings.problems(), seed=self.seed)
        (ARTIFACTS / f"faults-{name}.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
        return data
