"""The heartbeat's rule (heartbeat.lua), driven through the engine's calls on a real Redis: a
worker is reaped only when its deadline passed while the queue's workers could beat. After a gap
in the queue's beats (nobody could beat: Redis down, or cut off from every worker) every worker
has a full TTL from the first beat after it; a worker silent while others beat is reaped at its
deadline; ``start`` gives a worker whose deadline passed nothing until it beats; a worker whose beat
failed sends it again at once, not an interval later (heartbeat.py)."""

import asyncio
import time
from types import SimpleNamespace

import redis

from queues import Queue
from queues.engine import commands, keys, readmodel
from queues.engine.codes import Code
from queues.engine.config import Config
from queues.engine.worker.heartbeat import RETRY_MAX, Heart
from tests.engine_calls import GRACE, LOCK_TTL, register

#: A TTL and an interval that leave room on a loaded machine: beats 0.2 s apart are "in a row";
#: beats more than TTL - INTERVAL (1.5 s) apart are a gap.
TTL, INTERVAL, EVERY = 2.0, 0.5, 0.2


def beat(client, queue, worker):
    """(status, workers reaped, tasks recovered) of one beat of ``worker``."""
    return commands.heartbeat(
        queue,
        worker,
        ttl=TTL,
        interval=INTERVAL,
        lock_ttl=LOCK_TTL,
        retries=1,
        backoff=0,
        backoff_max=1,
        jitter=0,
        history=10,
    ).run(client)


def take(client, queue, worker, grace=GRACE):
    return commands.start(queue, worker, 1, lock_ttl=LOCK_TTL, grace=grace, default_timeout=0, result_ttl=60).run(
        client
    )


def _two_workers_with_a_task_each(client, queue, beat_first=True):
    q = Queue(queue)
    for w in ("w1", "w2"):
        register(client, queue, w, ttl=TTL)
    first = q.enqueue("w1's")
    assert [t.id for t in take(client, queue, "w1").tasks] == [first]
    second = q.enqueue("w2's")
    assert [t.id for t in take(client, queue, "w2").tasks] == [second]
    stuck = q.enqueue("w1's, timing out", timeout=1)
    assert [t.id for t in take(client, queue, "w1", grace=0).tasks] == [stuck]
    for w in ("w1", "w2"):
        assert not beat_first or beat(client, queue, w)[0] == Code.OK
    return q, first, second, stuck


def test_the_first_beat_after_a_gap_reaps_no_worker_and_takes_no_task(client):
    """No beat for longer than the TTL (an outage): the next beat reaps nobody and recovers no task past its deadline."""
    q, _, second, stuck = _two_workers_with_a_task_each(client, "hb1")
    time.sleep(TTL + 0.5)  # nobody beats: w2's deadline and the stuck task's pass
    assert beat(client, "hb1", "w1") == (Code.OK, 0, 0)
    assert (q.get(second).state, q.get(second).worker) == ("active", "w2")
    assert (q.get(stuck).state, q.get(stuck).worker) == ("active", "w1")
    assert beat(client, "hb1", "w2")[0] == Code.OK


def test_a_gap_before_the_queues_first_beat_reaps_no_worker(client):
    """Workers registered, then no beat at all for longer than the TTL (Redis restarted before their first beat): ..."""
    # ... the first beat reaps nobody. (A registration counts as a beat of the queue's clock, and a queue with no
    # beat noted is in a gap: before, the first beat after such a restart found no clock and judged every deadline.)
    q, _, second, _ = _two_workers_with_a_task_each(client, "hb5", beat_first=False)
    time.sleep(TTL + 0.5)
    assert beat(client, "hb5", "w1") == (Code.OK, 0, 0)
    assert (q.get(second).state, q.get(second).worker) == ("active", "w2")


def test_a_worker_that_does_not_beat_within_a_ttl_of_the_gap_is_reaped_then(client):
    """After a gap only w1 beats: w2 is reaped a TTL after the first beat, not before, its task back at the front."""
    q, _, second, stuck = _two_workers_with_a_task_each(client, "hb2")
    time.sleep(TTL + 0.5)
    reaped_at = recovered = None
    first_ms = readmodel.server_ms(client)
    deadline = time.monotonic() + TTL + 5
    while reaped_at is None and time.monotonic() < deadline:
        _, reaped, got = beat(client, "hb2", "w1")
        recovered = recovered or got
        if reaped:
            reaped_at = readmodel.server_ms(client)
        time.sleep(EVERY)
    assert reaped_at is not None, "w2 was never reaped"
    assert reaped_at - first_ms >= TTL * 1000, f"w2 reaped {reaped_at - first_ms} ms after the first beat after the gap"
    assert reaped_at - first_ms <= TTL * 1000 + 1500
    assert recovered == 1 and q.get(stuck).state == "pending"
    assert {t.id for t in readmodel.pending(client, "hb2", 0, 2)} == {second, stuck}
    assert beat(client, "hb2", "w2")[0] == Code.NOT_REGISTERED


def test_a_worker_silent_while_others_beat_is_reaped_at_its_deadline(client):
    """w1 beats every 0.2 s and w2 falls silent (cut off, frozen): w2 is reaped once its deadline passed, not before."""
    q, _, second, _ = _two_workers_with_a_task_each(client, "hb3")
    # w2's deadline as Redis keeps it (its last beat + TTL): "not before" is judged against it, as
    # the moment read next can come well after that beat on a loaded machine
    deadline_ms = client.zscore(keys.queue_key("hb3", "workers"), "w2")
    silent_from = readmodel.server_ms(client)
    reaped_at = None
    deadline = time.monotonic() + TTL + 5
    while reaped_at is None and time.monotonic() < deadline:
        if beat(client, "hb3", "w1")[1]:
            reaped_at = readmodel.server_ms(client)
        time.sleep(EVERY)
    assert reaped_at is not None and deadline_ms <= reaped_at <= silent_from + TTL * 1000 + 1500, reaped_at
    assert q.get(second).state == "pending"


def test_start_gives_a_worker_whose_deadline_passed_nothing_until_it_beats(client):
    """A worker that has not beaten for its TTL asks for a task: start answers LATE and takes nothing; after a beat ..."""
    # ... it takes the task. (It would be failed by another worker's next beat: what it took would run twice.)
    q = Queue("hb4")
    register(client, "hb4", "w", ttl=0.3)
    tid = q.enqueue("waiting")
    time.sleep(0.5)
    reply = take(client, "hb4", "w")
    assert (reply.status, reply.tasks) == (Code.LATE, [])
    assert q.get(tid).state == "pending"
    assert not client.sismember(keys.queue_key("hb4", "idle"), "w")  # no hand-over goes to it either
    assert beat(client, "hb4", "w")[0] == Code.OK
    assert [t.id for t in take(client, "hb4", "w").tasks] == [tid]


def test_an_enqueue_hands_no_task_to_an_idle_worker_whose_deadline_passed(client):
    """An idle worker that has not beaten for its TTL is handed nothing by an enqueue (nor listed idle): the task ..."""
    # ... waits for a worker that can run it, as start answers LATE. (The enqueue's hand-over took the task in the
    # late worker's name: the next beat of another worker reaped it and ran the task again elsewhere.)
    q = Queue("hb6")
    register(client, "hb6", "late", ttl=0.3)
    assert take(client, "hb6", "late").tasks == []
    assert client.sismember(keys.queue_key("hb6", "idle"), "late")  # idle, waiting to be handed a task
    time.sleep(0.5)  # its deadline passes: it could not beat
    tid = q.enqueue("for a live worker")
    assert (q.get(tid).state, q.get(tid).worker) == ("pending", None)
    assert not client.sismember(keys.queue_key("hb6", "idle"), "late")
    assert beat(client, "hb6", "late")[0] == Code.OK
    assert [t.id for t in take(client, "hb6", "late").tasks] == [tid]


def test_a_failed_beat_is_sent_again_at_once_not_an_interval_later():
    """A worker's beats fail twice (a connection reset, Redis restarting), then get through: the beats are sent ..."""
    # ... again at once and within RETRY_MAX, not a HEARTBEAT_INTERVAL later (issue 31 item 1: a failed beat waited
    # a whole interval, so two failures in a row left a live worker past its deadline and it was reaped).
    config = Config().with_(heartbeat_interval=5.0, heartbeat_ttl=12.0)
    status = SimpleNamespace(registered=True, stopping=False, quiet=False, poke=lambda: None)
    heart = Heart(
        SimpleNamespace(config=config, name="w"),
        None,
        None,
        status,
        duties=SimpleNamespace(start=lambda r: None),
        gone=None,
        counts=None,
        on_registered=None,
        on_lost=None,
        fatal=None,
    )
    sent = []

    async def beat_once(r):
        sent.append(time.monotonic())
        if len(sent) <= 2:
            raise redis.exceptions.ConnectionError("Connection closed by server.")
        return True, []

    heart._beat_once = beat_once

    async def main():
        heart.wake.set()  # beat now rather than an interval from now
        task = asyncio.ensure_future(heart._beat(None))
        while len(sent) < 3 and not task.done():
            await asyncio.sleep(0.01)
            if sent and time.monotonic() - sent[0] > config.heartbeat_interval + 1:
                break
        await asyncio.sleep(0.2)  # a fourth beat would come an interval later, not now
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert len(sent) == 3, sent
    assert sent[1] - sent[0] < RETRY_MAX, f"the first retry came {sent[1] - sent[0]:.2f} s after the failure"
    assert sent[2] - sent[1] <= RETRY_MAX + 0.3, f"the second retry came {sent[2] - sent[1]:.2f} s after"
