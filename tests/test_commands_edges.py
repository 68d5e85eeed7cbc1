"""Bad input to the management commands: a clear one-line error, nothing written to Redis."""

import signal

from tests.conftest import manage, wait_registered


def test_worker_refuses_a_grace_that_is_not_a_number(client):
    """--grace nan or inf is a clear error, before anything reaches Redis."""
    for grace in ("nan", "inf"):
        done = manage("worker", "t1", "--grace", grace)
        assert done.returncode == 1, done.stderr
        assert "--grace must be a number of seconds >= 0" in done.stderr
        assert "Traceback" not in done.stderr
    assert client.keys("*") == []


def test_worker_refuses_processes_past_the_most(client):
    """--processes 1000000 is a clear error, not a fork of a million workers."""
    done = manage("worker", "t1", "--processes", "1000000")
    assert done.returncode == 2
    assert "--processes: must be a whole number >= 1 or auto, at most 1024" in done.stderr
    assert client.keys("*") == []


def test_supervisor_stops_cleanly_with_a_huge_grace(client, workers):
    """A supervisor with --grace 1e300 stops on SIGTERM: exit 0, no traceback."""
    w = workers(["t1"], name="huge-grace", grace="1e300", options=["--processes", "1"])
    wait_registered(client, "huge-grace-1")
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0, w.output()
    assert "Traceback" not in w.output()


def test_worker_refuses_a_queue_given_twice(client):
    """worker t1 t2 t1 is a clear error, not a worker serving t1 twice."""
    done = manage("worker", "t1", "t2", "t1", timeout=20)
    assert done.returncode == 1, done.stderr
    assert "queue(s) given more than once: t1" in done.stderr
    assert client.keys("*") == []


def test_worker_refuses_a_concurrency_past_the_most(client):
    """--concurrency past 10,000, or past 1,024 with isolated handlers (a process per slot), is a clear error before anything is forked."""
    done = manage("worker", "t1", "--concurrency", "1000000000", timeout=20)
    assert done.returncode == 1, done.stderr
    assert "--concurrency must be from 1 to 10,000, not 1000000000" in done.stderr
    done = manage("worker", "t1", "--concurrency", "2000", "--isolation", "process", timeout=30)
    assert done.returncode == 1, done.stderr
    assert "forks one process per slot: its concurrency must be at most 1,024 (--concurrency), not 2,000" in done.stderr
    assert "Traceback" not in done.stderr
    assert not [k for k in client.keys("*") if b"t1" in k]
