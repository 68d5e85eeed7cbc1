"""The chaos soak (``manage.py chaos``): drain N tasks over K workers while faults strike at
random moments, then count what was lost, run twice, or refused.

Set-up: a private ``redis-server`` with AOF (``appendfsync`` always or everysec) in a temporary
directory; the TCP proxy (``proxy``) in front of it, through which every worker and producer
talks to Redis; K workers (``manage.py worker worqr-chaos``, each with its outbox relay); P
producers committing batches through the outbox, and writing each committed id to a ledger
table in the same transaction. The handler appends one line per completed run to a file.

Faults, one at a time, ``--gap`` seconds apart (chosen at random among ``--faults``):

- ``kill``: ``kill -9`` of a worker (a new one replaces it);
- ``stop``: ``SIGSTOP`` of a worker for the heartbeat TTL plus 1.5 s, then ``SIGCONT``;
- ``redis``: ``kill -9`` of Redis, restarted on its AOF after 0.2 to 1 s;
- ``cut``: every connection through the proxy cut, new ones refused for 0.2 to 1 s;
- ``delay``: every chunk through the proxy delayed 50 to 300 ms for 1 to 3 s;
- ``producer``: a producer dies between a commit and its push (the relay must push the batch).

Figures (printed, and written as JSON): tasks committed, lost (committed, never completed; must
be 0 with ``appendfsync always``), unknown (run but never committed; must be 0), duplicates
(extra completed runs) per fault against the tasks in flight at that fault (must not exceed
them), stale completions refused by Redis (the workers' logs), the longest recovery (fault to
the completion of the last task it stranded), and the throughput under faults.
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import redis
from django.db import connections

from queues.engine import readmodel
from queues.models import OutboxTask
from queues.testing import RedisServer

from . import LEDGER, LEDGER_TURN, QUEUE
from .producer import DIED_AFTER_COMMIT
from .proxy import Proxy

FAULTS = ("kill", "stop", "redis", "cut", "delay", "producer")


@dataclass
class Fault:
    kind: str
    at: float  # time.time() when it struck
    lifted: float = 0.0  # when it was over (the worker resumed, Redis answered again...)
    in_flight: list = field(default_factory=list)  # ids in process when it struck
    stranded: list = field(default_factory=list)  # ids committed but not pushed (a producer's)
    detail: str = ""
    pid: int | None = None  # the worker it struck (kill, stop)
    relayed: float | None = None  # producer: seconds from its death until the relay pushed its rows
    duplicates: int = 0
    recovery: float | None = None


class Chaos:
    def __init__(
        self,
        tasks=20000,
        workers=4,
        concurrency=4,
        producers=2,
        batch=50,
        sleep_ms=10,
        rate=None,
        appendfsync="always",
        faults=FAULTS,
        gap=(0.5, 2.0),
        min_faults=0,
        drain_timeout=120.0,
        heartbeat_ttl=3.0,
        database="default",
        seed=None,
        directory=None,
        out=print,
    ):
        self.n, self.k, self.concurrency, self.p = tasks, workers, concurrency, producers
        self.batch, self.sleep_ms, self.appendfsync = batch, sleep_ms, appendfsync
        self.rate = rate  # tasks/s over all producers (None: as fast as they can)
        self.kinds, self.gap, self.min_faults = tuple(faults), gap, min_faults
        self.drain_timeout, self.ttl, self.database = drain_timeout, heartbeat_ttl, database
        self.rng = random.Random(seed)
        self.seed = seed
        self.keep_dir = directory is not None
        self.dir = Path(directory or tempfile.mkdtemp(prefix="worqr-chaos-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.workers, self.producers = {}, {}  # name -> Popen
        self.faults = []
        self.generation = 0
        self.runs = defaultdict(list)  # id -> [(start, end, pid)]
        self._offsets = {}
        self._bag = []

    # -- processes ---------------------------------------------------------------------------

    def _env(self):
        return dict(
            os.environ,
            WORQR_REDIS_URL=self.proxy.url,
            WORQR_CHAOS_DIR=str(self.dir),
            PYTHONUNBUFFERED="1",
        )

    def _spawn(self, args, log):
        return subprocess.Popen(
            [sys.executable, "-m", "django", *args],
            env=self._env(),
            stdout=open(self.dir / log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_worker(self):
        self.generation += 1
        name = f"chaos-{self.generation}"
        self.workers[name] = self._spawn(
            [
                "worker",
                QUEUE,
                "--concurrency",
                str(self.concurrency),
                "--name",
                name,
                "--grace",
                "1",
                "--log-level",
                "WARNING",
            ],
            f"worker-{name}.log",
        )

    def start_producer(self):
        self.generation += 1
        name = f"producer-{self.generation}"
        self.producers[name] = self._spawn(
            [
                "chaos",
                "--produce",
                "--tasks",
                str(self.n),
                "--batch",
                str(self.batch),
                "--sleep-ms",
                str(self.sleep_ms),
                "--database",
                self.database,
                *(["--rate", str(self.rate / self.p)] if self.rate else []),
            ],
            f"{name}.log",
        )

    def _replace_dead(self, producing):
        for name, proc in list(self.workers.items()):
            if proc.poll() is not None:
                del self.workers[name]
                self.start_worker()
        for name, proc in list(self.producers.items()):
            code = proc.poll()
            if code is not None:
                del self.producers[name]
                if code != 0 and producing():
                    self.start_producer()

    # -- the ledger --------------------------------------------------------------------------

    def _ledger_reset(self):
        with connections[self.database].cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {LEDGER}")
            cur.execute(f"CREATE TABLE {LEDGER} (task_id varchar(220) PRIMARY KEY)")
            cur.execute(f"DROP TABLE IF EXISTS {LEDGER_TURN}")
            cur.execute(f"CREATE TABLE {LEDGER_TURN} (n integer NOT NULL)")
            cur.execute(f"INSERT INTO {LEDGER_TURN} (n) VALUES (0)")
        OutboxTask.objects.using(self.database).filter(queue=QUEUE).delete()

    def _ledger(self):
        with connections[self.database].cursor() as cur:
            cur.execute(f"SELECT task_id FROM {LEDGER}")
            return {row[0] for row in cur.fetchall()}

    def _ledger_drop(self):
        with connections[self.database].cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {LEDGER}")
            cur.execute(f"DROP TABLE IF EXISTS {LEDGER_TURN}")

    # -- runs --------------------------------------------------------------------------------

    def read_runs(self):
        """Read the lines the handlers appended since the last call."""
        for path in self.dir.glob("runs-*.log"):
            with open(path, "rb") as f:
                f.seek(self._offsets.get(path, 0))
                data = f.read()
            end = data.rfind(b"\n") + 1
            self._offsets[path] = self._offsets.get(path, 0) + end
            for line in data[:end].decode().splitlines():
                task_id, pid, start, stop = line.split()
                self.runs[task_id].append((float(start), float(stop), int(pid)))

    # -- faults ------------------------------------------------------------------------------

    def _in_flight(self, worker=None):
        try:
            return readmodel.in_flight(self.direct, QUEUE, worker)
        except redis.RedisError:
            return []

    def strike(self, kind):
        now = time.time()
        fault = Fault(kind, now)
        if kind in ("kill", "stop"):
            name = self.rng.choice(sorted(self.workers))
            proc = self.workers[name]
            fault.in_flight, fault.detail, fault.pid = self._in_flight(name), name, proc.pid
            if kind == "kill":
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                del self.workers[name]
                self.start_worker()
            else:
                os.killpg(proc.pid, signal.SIGSTOP)
                time.sleep(self.ttl + 1.5)
                os.killpg(proc.pid, signal.SIGCONT)
        elif kind == "redis":
            fault.in_flight = self._in_flight()
            self.redis.kill()
            down = self.rng.uniform(0.2, 1.0)
            time.sleep(down)
            self.redis.start()
            fault.detail = f"down {down:.2f} s, appendfsync {self.appendfsync}"
        elif kind == "cut":
            fault.in_flight = self._in_flight()
            refuse = self.rng.uniform(0.2, 1.0)
            self.proxy.cut(refuse)
            time.sleep(refuse)
            fault.detail = f"refused {refuse:.2f} s"
        elif kind == "delay":
            fault.in_flight = self._in_flight()
            self.proxy.delay = self.rng.uniform(0.05, 0.3)
            lasted = self.rng.uniform(1.0, 3.0)
            time.sleep(lasted)
            fault.detail = f"{self.proxy.delay * 1000:.0f} ms for {lasted:.1f} s"
            self.proxy.delay = 0.0
        elif kind == "producer":
            if not self.producers:
                return None
            name = self.rng.choice(sorted(self.producers))
            proc = self.producers[name]
            os.kill(proc.pid, signal.SIGUSR1)
            try:
                code = proc.wait(15)
            except subprocess.TimeoutExpired:
                code = None
            ids = self.dir / f"stranded-{proc.pid}.ids"
            if code == DIED_AFTER_COMMIT and ids.exists():
                fault.in_flight = []
                fault.detail = f"{name} died after committing {len(ids.read_text().split())} tasks"
                fault.stranded = ids.read_text().split()
                fault.relayed = self._wait_relayed(fault.stranded)
            else:
                fault.detail = f"{name} ended before its next commit (exit {code})"
        fault.lifted = time.time()
        self.faults.append(fault)
        return fault

    def _next_kind(self):
        """Every kind once per round, in a random order (so a short run has each of them); a
        producer fault when no producer is left is passed over."""
        for _ in range(2 * len(self.kinds)):
            if not self._bag:
                self._bag = list(self.kinds)
                self.rng.shuffle(self._bag)
            kind = self._bag.pop()
            if kind != "producer" or self.producers:
                return kind
        return self.rng.choice([k for k in self.kinds if k != "producer"] or ["kill"])

    def _wait_relayed(self, ids, timeout=30.0):
        """Seconds until none of ``ids`` is left in the outbox (the relay pushed them)."""
        start = time.time()
        while OutboxTask.objects.using(self.database).filter(task_id__in=ids).exists():
            if time.time() - start > timeout:
                return None
            time.sleep(0.05)
        return round(time.time() - start, 3)

    # -- the run -----------------------------------------------------------------------------

    def run(self):
        started = time.time()
        self._ledger_reset()
        self.redis = RedisServer(directory=str(self.dir), appendfsync=self.appendfsync).start()
        self.direct = redis.Redis(port=self.redis.port, socket_connect_timeout=1, socket_timeout=5)
        self.proxy = Proxy(self.redis.port).start()
        try:
            for _ in range(self.k):
                self.start_worker()
            for _ in range(self.p):
                self.start_producer()
            figures = self._drive()
        finally:
            for proc in [*self.workers.values(), *self.producers.values()]:
                try:
                    os.killpg(proc.pid, signal.SIGCONT)
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)
            self.redis.kill()
            self._ledger_drop()
        figures["wall_seconds"] = round(time.time() - started, 1)
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return figures

    def _drive(self):
        committed = set()
        next_fault = time.time() + self.rng.uniform(*self.gap) + 2.0  # let the workers start
        last_progress, completed_before = time.time(), 0
        faults_over = None  # when the last fault was lifted, once no more are injected

        def producing():
            return len(committed) < self.n

        while True:
            self.read_runs()
            committed = self._ledger()
            self._replace_dead(producing)
            completed = sum(1 for i in committed if i in self.runs)
            if completed != completed_before:
                last_progress, completed_before = time.time(), completed
            done = len(committed) >= self.n and completed == len(committed)
            if done and len(self.faults) >= self.min_faults:
                break
            stalled = not done and time.time() - last_progress > 30  # something is wrong: stop faults
            if faults_over is None and stalled:
                faults_over = time.time()
            if done and faults_over is not None:
                break
            if faults_over is None and time.time() >= next_fault:
                fault = self.strike(self._next_kind())
                if fault is not None:
                    self.out(f"  fault {len(self.faults):3d}: {fault.kind:8s} {fault.detail}")
                next_fault = time.time() + self.rng.uniform(*self.gap)
            if faults_over is not None and time.time() - faults_over > self.drain_timeout:
                break
            time.sleep(0.1)
        # Settle: a stopped worker may still finish a run it had (a duplicate to count).
        time.sleep(1.0)
        self.read_runs()
        committed = self._ledger()
        left_in_outbox = OutboxTask.objects.using(self.database).filter(queue=QUEUE).count()
        return self._figures(committed, left_in_outbox)

    def _stale_refused(self):
        total = 0
        for path in self.dir.glob("worker-*.log"):
            text = path.read_text(errors="replace")
            total += text.count("is stale; completion refused") + text.count("is stale; failure refused")
        return total

    def _figures(self, committed, left_in_outbox):
        runs = self.runs
        lost = sorted(committed - set(runs))
        unknown = sorted(set(runs) - committed)
        # Each extra run of a task goes to the last fault before it started that had the task in
        # flight (or, failing that, the last fault before it: an unexplained duplicate).
        # In flight at a fault: what Redis said was (the worker's, or all) at its start, and the
        # runs (of that worker) going on while it lasted, or until a heartbeat TTL after.
        for f in self.faults:
            held = set(f.in_flight)
            for task_id, rs in runs.items():
                if any(s <= f.lifted + self.ttl and e >= f.at and (f.pid is None or pid == f.pid) for s, e, pid in rs):
                    held.add(task_id)
            f.in_flight = sorted(held) if f.kind != "producer" else []
        unexplained = 0
        for task_id, rs in runs.items():
            rs.sort()
            for start, _, _ in rs[1:]:
                before = [f for f in self.faults if f.at <= start]
                holding = [f for f in before if task_id in set(f.in_flight)]
                if holding:
                    holding[-1].duplicates += 1
                else:
                    unexplained += 1
                    if before:
                        before[-1].duplicates += 1
        for f in self.faults:
            stranded = set(f.in_flight) | set(f.stranded)
            recoveries = []
            for task_id in stranded:
                # Run again after the fault (its first run's report was lost): until that ended;
                # else until its run ended.
                again = [end for start, end, _ in runs.get(task_id, ()) if start >= f.at]
                ends = again or [end for start, end, _ in runs.get(task_id, ()) if end >= f.at]
                if ends:
                    recoveries.append(min(ends) - f.at)
            if not recoveries:  # nothing stranded: until the next completion after it was lifted
                after = [end for rs in runs.values() for _, end, _ in rs if end >= f.lifted]
                recoveries = [min(after) - f.at] if after else []
            f.recovery = round(max(recoveries), 3) if recoveries else None
        starts = [s for rs in runs.values() for s, _, _ in rs]
        ends = [e for rs in runs.values() for _, e, _ in rs]
        span = (max(ends) - min(starts)) if starts else 0.0
        per_kind = defaultdict(lambda: {"faults": 0, "duplicates": 0, "in_flight": 0})
        for f in self.faults:
            per_kind[f.kind]["faults"] += 1
            per_kind[f.kind]["duplicates"] += f.duplicates
            per_kind[f.kind]["in_flight"] += len(f.in_flight)
        over = [f for f in self.faults if f.duplicates > len(f.in_flight)]
        recoveries = [f for f in self.faults if f.recovery is not None]
        longest = max(recoveries, key=lambda f: f.recovery) if recoveries else None
        figures = {
            "tasks": self.n,
            "workers": self.k,
            "concurrency": self.concurrency,
            "producers": self.p,
            "appendfsync": self.appendfsync,
            "seed": self.seed,
            "committed": len(committed),
            "completed": len(committed & set(runs)),
            "lost": len(lost),
            "lost_ids": lost[:20],
            "unknown": len(unknown),
            "left_in_outbox": left_in_outbox,
            "faults": len(self.faults),
            "faults_by_kind": dict(per_kind),
            "duplicates": sum(len(rs) - 1 for rs in runs.values()),
            "duplicates_unexplained": unexplained,
            "faults_with_more_duplicates_than_in_flight": len(over),
            "stale_completions_refused": self._stale_refused(),
            "longest_recovery_seconds": longest.recovery if longest else None,
            "longest_recovery_fault": longest.kind if longest else None,
            "longest_relay_seconds": max((f.relayed for f in self.faults if f.relayed is not None), default=None),
            "throughput_per_second": round(len(runs) / span, 1) if span else 0.0,
            "fault_log": [
                {k: v for k, v in asdict(f).items() if k not in ("in_flight", "stranded")}
                | {"in_flight": len(f.in_flight), "stranded": len(f.stranded)}
                for f in self.faults
            ],
        }
        figures["ok"] = (
            figures["unknown"] == 0
            and not over
            and unexplained == 0
            and (figures["lost"] == 0 or self.appendfsync != "always")
            and all(f.relayed is not None for f in self.faults if f.stranded)
        )
        return figures


def summary(figures):
    """The figures as a few lines of text."""
    lines = [
        f"chaos: {figures['committed']} tasks committed, {figures['completed']} completed, "
        f"{figures['lost']} lost, {figures['unknown']} run but never committed "
        f"(appendfsync {figures['appendfsync']}, {figures['workers']} workers x {figures['concurrency']})",
        f"  faults: {figures['faults']} "
        + ", ".join(f"{k} {v['faults']}" for k, v in sorted(figures["faults_by_kind"].items())),
        f"  duplicates: {figures['duplicates']} in all ("
        + ", ".join(
            f"{k} {v['duplicates']}/{v['in_flight']} in flight" for k, v in sorted(figures["faults_by_kind"].items())
        )
        + f"), unexplained {figures['duplicates_unexplained']}, faults over their in-flight count "
        f"{figures['faults_with_more_duplicates_than_in_flight']}",
        f"  stale completions refused: {figures['stale_completions_refused']}; longest relay of a dead "
        f"producer's rows: {figures['longest_relay_seconds']} s",
        f"  longest recovery: {figures['longest_recovery_seconds']} s ({figures['longest_recovery_fault']})",
        f"  throughput under faults: {figures['throughput_per_second']} tasks/s; wall {figures.get('wall_seconds')} s",
        "  OK" if figures["ok"] else "  FAILED",
    ]
    return "\n".join(lines)


def write_json(figures, path):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(figures, indent=2) + "\n")
