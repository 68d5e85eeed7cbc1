"""The worker's periodic duties (``queues.engine.worker.duties``), each on its own interval, run
in rounds after the heartbeat's beats, against the session's Redis. The duties' work as a whole
worker does it is tested in test_progress.py (gone workers), test_history.py (depth),
test_sweep.py (the queue sweep) and test_workflows_workers.py (the outbox sweep)."""

import asyncio

from queues import Queue
from queues.engine import keys, readmodel
from queues.engine.worker.duties import Duties
from queues.engine.worker.duties.depth import DepthSampler
from queues.engine.worker.duties.gone import GoneWorkers


class _Broken:
    """A duty with a bug: it raises every time it runs."""

    what = "broken"

    def __init__(self):
        self.runs = 0

    async def run(self, _beat_client):
        self.runs += 1
        raise ValueError("a bug in a duty")


def _round(conn, duties):
    async def go():
        redis = conn.async_client()
        try:
            await Duties(duties).run(redis)
        finally:
            await redis.aclose()

    asyncio.run(go())


def test_a_duty_that_fails_is_logged_and_the_round_goes_on(conn, client, caplog):
    """A duty raising an error is logged with its name, and the duties after it in the round still run."""
    Queue("du1").enqueue_many(["a", "b", "c"])
    broken = _Broken()

    async def go():
        redis = conn.async_client()
        try:
            await Duties([broken, DepthSampler(redis, conn, ["du1"])]).run(redis)
        finally:
            await redis.aclose()

    asyncio.run(go())
    assert broken.runs == 1
    assert "heartbeat's side work failed (broken)" in caplog.text and "a bug in a duty" in caplog.text
    assert readmodel.history(client, "du1", "1h")["depth"][-1] == 3


def test_the_depth_sampler_samples_on_its_own_interval(conn, client):
    """The depth is sampled at the first round, and not again until its interval has passed."""
    Queue("du2").enqueue_many(["a", "b"])
    key = keys.queue_key("du2", "depth")

    async def go():
        redis = conn.async_client()
        try:
            sampler = DepthSampler(redis, conn, ["du2"], every=3600)
            await sampler.run(redis)
            first = client.hlen(key)
            client.delete(key)
            await sampler.run(redis)  # within its interval: nothing
            later = client.hlen(key)
            eager = DepthSampler(redis, conn, ["du2"], every=0)
            await eager.run(redis)
            return first, later, client.hlen(key)
        finally:
            await redis.aclose()

    assert asyncio.run(go()) == (2, 0, 2)  # a minute's and an hour's sample


def test_gone_workers_are_noted_at_once_after_a_reap_and_otherwise_on_the_check_s_interval(conn, client):
    """A worker dead without a key is noted by the first check; later ones wait for the interval unless a beat reaped."""
    client.sadd(keys.WORKER_REGISTRY, "du-dead1")
    gone = GoneWorkers(conn, every=3600)
    _round(conn, [gone])
    assert [g["name"] for g in readmodel.gone_workers(client)] == ["du-dead1"]
    client.sadd(keys.WORKER_REGISTRY, "du-dead2")
    _round(conn, [gone])  # the check's interval has not passed
    assert client.sismember(keys.WORKER_REGISTRY, "du-dead2")
    gone.saw_reaped(0)  # a beat that reaped nobody changes nothing
    _round(conn, [gone])
    assert client.sismember(keys.WORKER_REGISTRY, "du-dead2")
    gone.saw_reaped(1)
    _round(conn, [gone])
    assert [(g["name"], g["how"]) for g in readmodel.gone_workers(client)] == [
        ("du-dead2", "reaped"),
        ("du-dead1", "reaped"),
    ]
    assert not client.sismember(keys.WORKER_REGISTRY, "du-dead2")
