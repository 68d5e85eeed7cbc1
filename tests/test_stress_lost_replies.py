"""Stress: producers enqueue through a proxy that loses the replies to calls Redis applied (the
connection reset, or left silent until the socket timeout), that refuses connections for longer
than ENQUEUE_RETRY_FOR (Redis down), and that loses every reply for a while, as real workers
drain the queue (issue 31). Each enqueue() call's tasks run exactly once; a RedisUnavailable's
``unknown`` ids ran at most once and its ``not_added`` ones never; no call outlasts
ENQUEUE_RETRY_FOR + one try's timeouts. The proxy is ``chaos.proxy`` (the soak's too)."""

import json
import random
import threading
import time
from collections import Counter

import pytest

from chaos.proxy import Proxy
from queues.conf import build_config
from queues.engine import Connection, Queue, RedisUnavailable
from tests.conftest import ON_CLUSTER, wait_for
from tests.stress import MARKS, scaled, starts_per_id, wait_ready

pytestmark = [*MARKS, pytest.mark.skipif(ON_CLUSTER, reason="the proxy stands in front of one redis-server")]

QUEUE = "st2"
RETRY_FOR, SOCKET_TIMEOUT = 1.0, 0.3
#: The longest an enqueue may take: ENQUEUE_RETRY_FOR, then one try: its connect and its reply
#: (both bounded by the socket timeout here), plus a loaded machine's slack.
BOUND = RETRY_FOR + 2 * SOCKET_TIMEOUT + 2.0


class Producer(threading.Thread):
    """Enqueues until told to stop, one task or three at a time, and keeps what each call gave."""

    def __init__(self, conn, n, rng):
        super().__init__(daemon=True)
        self.q, self.n, self.rng = Queue(QUEUE, conn), n, rng
        self.stop = threading.Event()
        self.ok, self.added, self.unknown, self.not_added = [], [], [], []
        self.errors, self.slowest, self.calls = [], 0.0, 0

    def run(self):
        k = 0
        while not self.stop.is_set():
            many = self.rng.random() < 0.3
            payloads = [json.dumps({"p": self.n, "k": k + i}) for i in range(3 if many else 1)]
            k += len(payloads)
            began = time.monotonic()
            try:
                got = self.q.enqueue_many(payloads) if many else [self.q.enqueue(payloads[0])]
                self.ok += got
            except RedisUnavailable as exc:
                self.added += exc.added
                self.unknown += exc.unknown
                self.not_added += exc.not_added
                assert len(exc.added) + len(exc.unknown) + len(exc.not_added) == len(payloads), exc
            except Exception as exc:  # noqa: BLE001 (reported by the test)
                self.errors.append(repr(exc))
            self.calls += 1
            self.slowest = max(self.slowest, time.monotonic() - began)
            time.sleep(self.rng.uniform(0, 0.01))


def test_lost_replies_refusals_and_silence_never_run_a_task_twice(client, workers, redis_server):
    """Replies lost (reset or silent), connections refused, every reply lost: each task runs once, the errors say which."""
    for name in ("lr-a", "lr-b"):
        workers([QUEUE], concurrency=4, name=name)  # straight to Redis: only the producers' link is faulted
    wait_ready(client, "lr-a", 1)
    wait_ready(client, "lr-b", 2)
    proxy = Proxy(redis_server.port).start()
    rng = random.Random(31)
    conn = Connection(
        proxy.url, build_config().with_(enqueue_retry_for=RETRY_FOR, enqueue_socket_timeout=SOCKET_TIMEOUT)
    )
    producers = [Producer(conn, n, random.Random(rng.random())) for n in range(3)]
    phase = scaled(4.0, 60.0)
    try:
        for p in producers:
            p.start()
        for _ in range(scaled(1, 5)):
            proxy.lose_replies(chance=0.3, mode="reset", match=b"EVALSHA", seed=rng.random())
            time.sleep(phase)
            proxy.lose_replies(chance=0.3, mode="drop", match=b"EVALSHA", seed=rng.random())
            time.sleep(phase)
            proxy.lose_replies()
            proxy.cut(refuse_for=RETRY_FOR + 1.5)  # Redis "down" for longer than the retries last
            time.sleep(RETRY_FOR + 2.0)
            proxy.lose_replies(every=1, mode="drop", match=b"EVALSHA")  # every reply lost for a while
            time.sleep(RETRY_FOR + 2.0)
            proxy.lose_replies()
            time.sleep(0.5)
    finally:
        for p in producers:
            p.stop.set()
        for p in producers:
            p.join(BOUND + 5)
        proxy.stop()
    assert not any(p.errors for p in producers), [p.errors[:3] for p in producers]
    ok = [i for p in producers for i in p.ok]
    added = [i for p in producers for i in p.added]
    unknown = [i for p in producers for i in p.unknown]
    not_added = [i for p in producers for i in p.not_added]
    q = Queue(QUEUE)
    wait_for(
        lambda: (c := q.counts())["pending"] + c["active"] + c["delayed"] == 0 and c["completed"] == c["enqueued"],
        timeout=60,
        interval=0.2,
        message=lambda: f"the queue to drain: {q.counts()}",
    )
    started = starts_per_id(client, QUEUE)
    twice = {i: n for i, n in started.items() if n > 1}
    certain = ok + added
    summary = (
        f"{sum(p.calls for p in producers)} calls, {len(ok)} ids returned, {len(added)} added / {len(unknown)} "
        f"unknown / {len(not_added)} not added in errors, {proxy.lost} replies lost, {len(twice)} ran twice"
    )
    assert not twice, f"{summary}: {sorted(twice.items())[:5]}"
    assert all(started[i] == 1 for i in certain), f"{summary}: {[i for i in certain if started[i] != 1][:5]}"
    assert not any(started[i] for i in not_added), f"{summary}: a task said not added ran"
    assert set(started) <= set(certain) | set(unknown), f"{summary}: a task ran that no call gave"
    assert q.counts()["enqueued"] == len(started), summary
    # The faults happened, and the errors told the two kinds apart.
    assert proxy.lost >= 10 and unknown and not_added and len(set(ok)) == len(ok), summary
    assert max(p.slowest for p in producers) <= BOUND, (
        f"{summary}: a call took {max(p.slowest for p in producers):.2f} s"
    )
    print(summary, Counter(started.values()))
