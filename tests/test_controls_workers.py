"""Task controls with real worker processes: throttle and debounce under 8 concurrent producers
and 2 workers (one killed with SIGKILL in between), expiry of a paused queue's task, and a
RateLimited that holds the queue on every one of 3 workers."""

import json
import threading
import time

from queues import Queue
from tests.conftest import records, wait_for, wait_registered

PRODUCERS = 8


def _produce(target, seconds):
    """Run ``target(i)`` in 8 threads at once for ``seconds``; returns every value they returned."""
    out, lock, start = [], threading.Lock(), threading.Barrier(PRODUCERS)

    def loop(i):
        start.wait()
        end = time.monotonic() + seconds
        mine = []
        while time.monotonic() < end:
            mine.append(target(i))
        with lock:
            out.extend(mine)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _two_workers(workers, client, queue):
    ws = [workers([queue], concurrency=2, name=f"{queue}-{i}") for i in range(2)]
    for w in ws:
        wait_registered(client, w.name)
    return ws


def test_throttle_runs_once_per_window_under_concurrent_producers_and_a_kill(client, workers):
    """8 producers for 2.4 s, windows of 0.6 s, a worker killed midway: each window's one task runs, none is lost."""
    q = Queue("ctl-th")
    ws = _two_workers(workers, client, "ctl-th")
    counter = iter(range(10**9))

    def send(i):
        return q.enqueue(json.dumps({"p": i, "n": next(counter)}), throttle=("k", 0.6))

    began = time.monotonic()
    ids = _produce(send, 1.2)
    ws[0].kill()  # SIGKILL, between windows
    replacement = workers(["ctl-th"], concurrency=2, name="ctl-th-2")
    wait_registered(client, replacement.name)
    ids += _produce(send, 1.2)
    elapsed = time.monotonic() - began
    distinct = set(ids)
    # windows open at least 0.6 s apart: at most one per 0.6 s of sending (and the first)
    assert 3 <= len(distinct) <= elapsed / 0.6 + 1, (len(distinct), elapsed)
    assert len(ids) > 5 * len(distinct)  # most enqueues fell inside a window and added nothing
    ran = wait_for(
        lambda: (r := records(client, "ctl-th")) and {x["id"] for x in r} >= distinct and r,
        timeout=60,
        message="every window's task to run",
    )
    assert {x["id"] for x in ran} == distinct  # nothing lost, nothing extra
    assert q.counts()["enqueued"] == len(distinct)


def test_debounce_runs_once_per_quiet_period_with_the_last_payload(client, workers):
    """Two bursts of 8 producers, a worker killed between them: one run per burst, each with the burst's last payload."""
    q = Queue("ctl-db")
    ws = _two_workers(workers, client, "ctl-db")
    quiet = 1.5

    def burst(tag):
        got = _produce(lambda i: q.enqueue(json.dumps({"tag": tag, "p": i}), debounce=("doc", quiet)), 0.5)
        last = q.enqueue(json.dumps({"tag": tag, "last": True}), debounce=("doc", quiet))
        assert set(got) == {last}  # every enqueue of the burst named the one task
        return last

    first = burst("a")
    ws[0].kill()  # SIGKILL while the task waits out its quiet period
    wait_for(lambda: len(records(client, "ctl-db")) == 1, timeout=30, message="the first burst's run")
    second = burst("b")
    assert second != first  # the first had started: a new task
    recs = wait_for(lambda: (r := records(client, "ctl-db")) and len(r) == 2 and r, timeout=30, message="two runs")
    time.sleep(quiet)  # nothing more runs
    recs = records(client, "ctl-db")
    assert [(r["id"], json.loads(r["payload"])) for r in recs] == [
        (first, {"tag": "a", "last": True}),
        (second, {"tag": "b", "last": True}),
    ]


def test_a_paused_queues_task_expires_and_one_resumed_in_time_runs(client, workers):
    """expires=1, resumed after 2 s: never runs, reads expired; expires=30, resumed in time: runs."""
    q = Queue("ctl-ex")
    w = workers(["ctl-ex"], concurrency=2, name="ctl-ex-0")
    wait_registered(client, w.name)
    q.pause()
    late = q.enqueue(json.dumps({"n": "late"}), expires=1)
    kept = q.enqueue(json.dumps({"n": "kept"}), expires=30)
    time.sleep(2)
    q.resume()
    wait_for(lambda: records(client, "ctl-ex"), timeout=30, message="the task in time to run")
    time.sleep(0.5)
    assert [r["id"] for r in records(client, "ctl-ex")] == [kept]
    assert q.counts()["expired"] == 1 and [e["id"] for e in q.expired()] == [late]


def test_rate_limited_holds_the_queue_on_every_worker(client, workers):
    """RateLimited(2) on one of 3 workers: no task starts within 2 s anywhere; the raiser runs again on attempt 1."""
    q = Queue("ctl-rl")
    for i in range(3):
        workers(["ctl-rl"], concurrency=2, name=f"ctl-rl-{i}")
    for i in range(3):
        wait_registered(client, f"ctl-rl-{i}")
    raiser = q.enqueue(json.dumps({"limited": 2}))
    wait_for(lambda: q.limits()["held_until"], timeout=30, message="the hold")
    # each runs 0.3 s: one worker's 2 slots take 1.8 s for all 12, so that the others, woken a
    # little later on a busy machine, still get some (a no-op task let the first drain them all)
    others = q.enqueue_many([json.dumps({"n": i, "sleep": 0.3}) for i in range(12)])
    recs = wait_for(
        lambda: (r := records(client, "ctl-rl")) and len(r) == 14 and r, timeout=60, message="every task to run"
    )
    (raised,) = [r for r in recs if r["outcome"] == "raised"]
    again = [r for r in recs if r["id"] == raiser and r["outcome"] == "ok"]
    assert raised["id"] == raiser and raised["attempt"] == 1 and len(again) == 1
    assert again[0]["attempt"] == 1  # no attempt used
    held_from = raised["end"]  # the hold starts after the handler returned
    starts = sorted(r["start"] for r in recs if r is not raised)
    assert starts[0] >= held_from + 2.0 - 0.002, starts[0] - held_from
    assert {r["id"] for r in recs} == {raiser, *others}
    assert len({r["pid"] for r in recs}) >= 2  # the workers shared the work after the hold


def test_rate_limited_from_an_isolated_handler_holds_the_queue(client, workers):
    """A RateLimited raised in a handler process holds the queue as on a thread: the task runs again, attempt 1."""
    q = Queue("ctl-rl-iso")
    w = workers(["ctl-rl-iso"], concurrency=1, name="ctl-rl-iso-0")
    wait_registered(client, w.name)
    raiser = q.enqueue(json.dumps({"limited": 1}))
    recs = wait_for(lambda: (r := records(client, "ctl-rl-iso")) and len(r) == 2 and r, timeout=60, message="two runs")
    assert [(r["id"], r["outcome"], r["attempt"]) for r in recs] == [(raiser, "raised", 1), (raiser, "ok", 1)]
    assert recs[1]["start"] >= recs[0]["end"] + 1.0 - 0.002
