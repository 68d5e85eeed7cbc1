"""``worker --processes N``: a supervisor and N worker processes, with real signals."""

import json
import os
import re
import signal
import subprocess
import sys
import time

from queues import Queue
from queues.engine import readmodel
from tests.conftest import ROOT, records, wait_for


def listed(client):
    """{name: pid} of the live workers, as `manage.py queues --json` lists them."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "queues", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings"),
    )
    assert out.returncode == 0, out.stderr
    return {w["name"]: w["pid"] for w in json.loads(out.stdout)["workers"]}


def live(client):
    return {w["name"]: w["pid"] for w in readmodel.workers(client)}


def gone(pid):
    """Whether process ``pid`` has ended (a zombie not reaped yet by its new parent counts)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_two_processes_are_two_workers_and_a_killed_one_is_replaced(client, workers):
    """--processes 2: two workers, <name>-1 and <name>-2, in `queues --json`."""
    # kill -9 one: the supervisor starts it again within 5 s and its task goes back to the front: the new worker runs it
    # before the tasks queued behind it (the other worker is busy meanwhile).
    q = Queue("t1")
    sup = workers(["t1"], name="sup", options=("--processes", "2"))
    wait_for(lambda: set(live(client)) == {"sup-1", "sup-2"}, timeout=15, message="two workers")
    first = listed(client)
    assert set(first) == {"sup-1", "sup-2"} and sup.pid not in first.values()
    held = q.enqueue('{"sleep": 3}')
    wait_for(lambda: q.counts()["active"] == 1, message="the first worker busy")
    victim = q.get(held).worker
    q.enqueue('{"sleep": 12}')
    wait_for(lambda: q.counts()["active"] == 2, message="both workers busy")
    queued = q.enqueue_many(["q1", "q2"])
    os.kill(first[victim], signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: live(client).get(victim) not in (None, first[victim]), timeout=8, message="a new worker")
    replaced = time.monotonic() - killed
    assert replaced <= 5, f"replaced after {replaced:.1f} s"
    successor = live(client)[victim]
    ran = lambda: [r["id"] for r in records(client, "t1") if r["pid"] == successor]  # noqa: E731
    assert wait_for(lambda: len(ran()) == 3 and ran(), timeout=8, message="the new worker to run three tasks") == [
        held,
        *queued,
    ]
    assert sup.proc.poll() is None


def test_processes_auto_starts_one_worker_per_cpu(client, workers):
    """--processes auto: os.cpu_count() workers, named <name>-1 ... <name>-N."""
    n = os.cpu_count()
    sup = workers(["t1"], name="auto", options=("--processes", "auto"))
    expected = {f"auto-{i}" for i in range(1, n + 1)}
    wait_for(lambda: set(live(client)) == expected, timeout=15 + n, message=lambda: f"{n} workers: {sup.output()}")
    assert len(re.findall(r"started worker auto-\d+ \(pid", sup.output())) == n


def started_pids(sup, name):
    """The pids of the workers the supervisor started under ``name``, in order (from its log)."""
    return [int(pid) for pid in re.findall(rf"started worker {name} \(pid (\d+)\)", sup.output())]


def test_a_child_that_keeps_dying_is_restarted_with_backoff(client, workers):
    """kill -9 of the same child three times: started again at once, then after 1 s, then after 2 s."""
    sup = workers(["t1"], name="bo", options=("--processes", "1"))
    wait_for(lambda: "bo-1" in live(client), timeout=15, message="the worker")
    waited = []
    for n in (2, 3, 4):
        os.kill(started_pids(sup, "bo-1")[-1], signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda n=n: len(started_pids(sup, "bo-1")) == n, timeout=30, message=lambda: sup.output())
        waited.append(time.monotonic() - killed)
    # The delays it chose are in its log (below); what the clock can judge on a loaded machine is
    # that it waited at least them, each longer than the one before.
    assert 1 <= waited[1] and 2 <= waited[2] and waited[0] < waited[1] < waited[2], waited
    pattern = r"worker bo-1 exited \(signal 9\) after \d+ s; starting it again in (\d+) s"
    assert re.findall(pattern, sup.output()) == ["0", "1", "2"]
    wait_for(lambda: live(client).get("bo-1") == started_pids(sup, "bo-1")[-1], timeout=15, message="the 4th worker")


def test_sigterm_to_the_supervisor_stops_everything_with_exit_0_within_the_grace(client, workers):
    """SIGTERM to the supervisor."""
    # each worker lets its short task finish, gives the long one back within the grace (2 s), and every process exits 0.
    q = Queue("t2")
    sup = workers(["t2"], name="term", grace=2, options=("--processes", "2"))
    wait_for(lambda: len(live(client)) == 2, timeout=15, message="two workers")
    children = list(live(client).values())
    short, long = q.enqueue_many(['{"sleep": 0.5}', '{"sleep": 60}'])
    wait_for(lambda: q.counts()["active"] == 2, message="both running")
    sup.signal(signal.SIGTERM)
    # the grace (2 s), then giving back, deregistering, exiting: a ceiling well under the long task's 60 s
    assert sup.wait(timeout=30) == 0
    assert all(gone(pid) for pid in children)
    assert "exited (exit code 0)" in sup.output() and "exit code 1" not in sup.output()
    assert q.get(short) is None and q.counts()["completed"] == 1
    assert q.get(long).state == "pending" and live(client) == {}


def test_sigterm_to_the_supervisor_as_its_workers_start_still_exits_0(client, workers):
    """SIGTERM to the supervisor as soon as it forked its workers: each exits 0, not by the signal."""
    # The workers are still starting (their event loop does not handle SIGTERM yet): before the
    # fix they died by it ("exited (signal 15)", supervisor exit 1), 4 times out of 4 here.
    sup = workers(["t2"], name="early", grace=2, options=("--processes", "2"))
    wait_for(lambda: "started worker early-2" in sup.output(), timeout=20, interval=0.001, message="the forks")
    sup.signal(signal.SIGTERM)
    assert sup.wait(timeout=15) == 0, sup.output()
    assert sup.output().count("exited (exit code 0)") == 2 and "signal 15" not in sup.output()
    assert live(client) == {}


def test_ctrl_c_to_the_group_is_one_stop_and_a_second_signal_a_fast_one(client, workers):
    """SIGINT to the whole process group (a Ctrl-C) is one graceful stop, not a fast one."""
    # the workers ignore it and the supervisor passes it on once, so a 1 s task still finishes. A second signal ends the
    # grace at once.
    q = Queue("t3")
    sup = workers(["t3"], name="ctrlc", grace=30, options=("--processes", "2"))
    wait_for(lambda: len(live(client)) == 2, timeout=15, message="two workers")
    short, long = q.enqueue_many(['{"sleep": 1}', '{"sleep": 60}'])
    wait_for(lambda: q.counts()["active"] == 2, message="both running")
    os.killpg(sup.pid, signal.SIGINT)
    wait_for(lambda: q.get(short) is None, timeout=30, message="the short task to finish")
    assert q.counts()["completed"] == 1 and q.get(long).state == "active"
    sup.signal(signal.SIGTERM)
    assert sup.wait(timeout=15) == 0  # a ceiling well under the 30 s grace the second signal ends
    assert q.get(long).state == "pending"


def test_a_killed_worker_takes_its_isolated_handlers_processes_with_it(client, workers):
    """kill -9 of a supervised worker."""
    # its isolated handler's process dies with it (no handler left running while its task runs again elsewhere).
    q = Queue("p2")
    workers(["p2"], name="kin", options=("--processes", "1"))
    wait_for(lambda: "kin-1" in live(client), timeout=15, message="the worker")
    tid = q.enqueue('{"spin": 1}')
    pid = wait_for(lambda: client.lindex(f"test:pid:{tid}", 0), message="the handler to start")
    os.kill(live(client)["kin-1"], signal.SIGKILL)
    wait_for(lambda: gone(int(pid)), timeout=30, message="the handler's process to die with its worker")


def test_a_supervised_workers_cancelled_isolated_handler_gets_sigterm_and_runs_its_finally(client, workers):
    """Under a supervisor, a cancel still reaches an isolated handler as SIGTERM: its finally block runs."""
    # A supervisor's worker starts with SIGTERM blocked (a stop while it starts waits for its
    # loop); its handler processes must not inherit that, or only the SIGKILL would end them.
    q = Queue("p2")
    workers(["p2"], name="sv", options=("--processes", "1"))
    wait_for(lambda: "sv-1" in live(client), timeout=15, message="the worker")
    tid = q.enqueue('{"linger": 1}')
    wait_for(lambda: client.lrange(f"test:pid:{tid}", 0, -1), message="the handler to start")
    q.cancel(tid)
    cleanup = wait_for(lambda: client.lrange(f"test:cleanup:{tid}", 0, -1), timeout=30, message="the finally block")
    assert cleanup == [b"1"]


def test_workers_stop_when_their_supervisor_is_killed(client, workers):
    """kill -9 of the supervisor."""
    # its workers get SIGTERM, give their tasks back and deregister (none is left running on its own).
    q = Queue("t4")
    sup = workers(["t4"], name="orphan", grace=1, options=("--processes", "2"))
    wait_for(lambda: len(live(client)) == 2, timeout=15, message="two workers")
    children = list(live(client).values())
    tid = q.enqueue('{"sleep": 60}')
    wait_for(lambda: q.counts()["active"] == 1, message="a task running")
    sup.signal(signal.SIGKILL)
    wait_for(lambda: all(gone(pid) for pid in children), timeout=10, message="the workers to exit")
    assert live(client) == {} and q.get(tid).state == "pending"
