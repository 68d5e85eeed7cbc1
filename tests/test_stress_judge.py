"""The big-backlog tests' judge (tests.stress.slow_commands with a RedisStalls): a machine that
holds Redis back is not counted as a script's work, and a script that does too much work is
still caught, on any machine."""

import os
import signal
import threading
import time

from queues import Queue
from queues.engine import commands
from tests.stress import MARKS, slow_commands

pytestmark = MARKS


def test_a_script_that_does_unbounded_work_is_caught(client, slowlog):
    """One purge call over 20,000 tasks (the engine purges 500 per call) is reported."""
    q = Queue("judge1")
    q.enqueue_many(["0"] * 20_000)  # about 0.4 s of work in one call on a quiet machine: far over
    stalls = slowlog(50_000)  # the bound, far under Redis's busy-script limit (5 s) on a loaded one
    deleted, _ = commands.purge("judge1", 20_000).run(q.client)
    assert deleted == 20_000
    slow = slow_commands(client, 50_000, stalls)
    assert [cmd for _, cmd in slow] == ["script purge"], slow


def test_a_busy_loop_sent_by_another_client_is_caught(client, slowlog):
    """A script sent outside the engine (no call of this process to compare with) that computes for a while."""
    stalls = slowlog(50_000)
    began = time.perf_counter()
    client.eval("local x = 0; for i = 1, 20000000 do x = x + i % 7 end; return 1", 0)
    took = time.perf_counter() - began
    slow = slow_commands(client, 50_000, stalls)
    assert len(slow) == 1 and slow[0][0] > 50_000, (took, slow)


def test_a_bounded_script_that_redis_was_stopped_in_is_not_counted(client, slowlog):
    """The redis-server is stopped (SIGSTOP) for 0.5 s in the middle of a bounded purge call."""
    # SLOWLOG logs the call at over 0.5 s; the server's CPU time over the call shows the script's
    # own work was under the bound. (The stop must land inside the script: tried a few times.)
    pid = int(client.info("server")["process_id"])
    q = Queue("judge2")
    for _ in range(5):
        q.enqueue_many(["0"] * 5_000)
        stalls = slowlog(200_000)

        def stop_meanwhile():
            time.sleep(0.01)
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.5)
            os.kill(pid, signal.SIGCONT)

        stopper = threading.Thread(target=stop_meanwhile)
        stopper.start()
        try:
            deleted, _ = commands.purge("judge2", 5_000).run(q.client)
        finally:
            stopper.join()
        assert deleted == 5_000
        raw = slow_commands(client, 200_000)
        if raw:  # the stop landed inside the script: SLOWLOG alone blames it
            assert slow_commands(client, 200_000, stalls) == [], raw
            return
    raise AssertionError("the stop never landed inside the purge call in 5 tries")
