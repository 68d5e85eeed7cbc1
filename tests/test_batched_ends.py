"""Ending many tasks in one call leaves Redis as ending each in its own call would.

The finish path gathers the writes that are alike for every plain task of a call (their
entries in the active, deadline and holder sets, their records of ended tasks, their hashes
and logs) into a few commands per call, and the take path reads pending's head in one
command. These tests end the same mix of tasks (plain, tagged, unique, locked, with a
timeout, a log, a kept result, a child waiting on it, a cancel asked while it ran, an
acknowledgement sent twice) once task by task and once all in one call, and compare every
trace the ends leave; and they count the commands Redis runs per task of a chunk drain.
"""

from queues import Queue
from queues.engine import commands, keys, readmodel
from queues.engine.codes import Code
from tests.conftest import wait_for
from tests.engine_calls import GRACE, LOCK_TTL, register


def completed(client, queue):
    """The queue's completed counter, read without a command that a script would run."""
    return int(client.hget(keys.queue_key(queue, "stats"), "completed") or 0)


#: (payload, enqueue options) of the mix, in order
MIX = [
    ("plain", {}),
    ("tagged", {"tags": ["red", "blue"]}),
    ("unique", {"unique": True}),
    ("locked", {"lock": "L1"}),
    ("timed", {"timeout": 30}),
    ("logged", {}),
    ("kept", {}),
    ("parent", {}),
    ("cancelled", {}),
    ("plain-2", {}),
]


def _run_mix(client, queue, together):
    """Enqueue MIX, take it all, end it (``together``: in one call) and return what Redis holds."""
    q = Queue(queue)
    ids = [q.enqueue(payload, **options) for payload, options in MIX]
    by_payload = dict(zip((p for p, _ in MIX), ids))
    Queue(f"{queue}-kid").enqueue("child", after=[by_payload["parent"]])
    register(client, queue)
    started = commands.start(
        queue, "w", len(MIX), lock_ttl=LOCK_TTL, grace=GRACE, default_timeout=0, result_ttl=60
    ).run(client)
    assert started.status == Code.OK and [t.id for t in started.tasks] == ids
    leases = {t.id: t.lease for t in started.tasks}
    assert sorted(leases.values()) == list(range(min(leases.values()), min(leases.values()) + len(MIX)))
    logged = by_payload["logged"]
    commands.progress(queue, [(logged, leases[logged], 0.5, "half", ["one", "two"])]).run(client)
    assert commands.cancel(queue, by_payload["cancelled"]).run(client) == Code.STOPPING
    acks = [(i, leases[i], "the result" if i == by_payload["kept"] else "", False) for i in ids]
    acks.append(acks[0])  # sent twice: the second is stale
    if together:
        codes = commands.finish(queue, "w", acks, result_ttl=60).run(client)
    else:
        codes = [commands.finish(queue, "w", [ack], result_ttl=60).run(client)[0] for ack in acks]
    ended = {}
    for payload, i in by_payload.items():
        e = readmodel.ended_task(client, i)
        ended[payload] = e and (e.task.state, e.task.payload, e.task.attempt, e.task.worker, e.log, e.log_total)
    qk = lambda kind: keys.queue_key(queue, kind)  # noqa: E731
    return {
        "codes": codes,
        "ended": ended,
        "hashes": {p: client.exists(keys.task_key(queue, i)) for p, i in by_payload.items()},
        "result": readmodel.task(client, by_payload["kept"]).result,
        "logs": [client.exists(keys.task_log_key(queue, i)) for i in ids],
        "sets": [client.exists(qk(k)) for k in ("active", "deadlines", "pending", "front")]
        + [client.scard(keys.worker_tasks_key(queue, "w"))],
        "tags": [readmodel.tagged_count(client, queue, t) for t in ("red", "blue")],
        "unique": client.hlen(qk("unique")),
        "lock": client.exists(keys.lock_key(queue, "L1")),
        "ended_zset": client.zcard(qk("ended")),
        "history_index": [client.zcard(qk(k)) for k in ("hcompleted", "hcancelled", "hfailed")],
        "outbox": [m.decode() for m in client.zrange(qk("outbox"), 0, -1)] == [by_payload["parent"]],
        "stats": Queue(queue).counts(),
        "leases": int(client.get(qk("leases"))),
    }


def test_one_call_ending_a_mix_of_tasks_leaves_what_one_call_per_task_leaves(client):
    """Ten tasks of every kind ended in one call leave the same records, sets, counters and leases as ten calls."""
    alone = _run_mix(client, "be-alone", together=False)
    together = _run_mix(client, "be-together", together=True)
    assert together == alone
    # and what both leave is right
    assert alone["codes"] == [Code.COMPLETED] * 8 + [Code.CANCELLED, Code.COMPLETED, Code.STALE]
    assert alone["ended"]["cancelled"][0] == "cancelled"
    assert {s for p, (s, *_) in alone["ended"].items() if p != "cancelled"} == {"completed"}
    assert alone["ended"]["logged"][4:] == (["one", "two"], 2)
    assert alone["hashes"] == {p: int(p == "kept") for p, _ in MIX} and alone["result"] == b"the result"
    assert alone["logs"] == [0] * len(MIX) and alone["sets"] == [0, 0, 0, 0, 0]
    assert alone["tags"] == [0, 0] and alone["unique"] == 0 and alone["lock"] == 0
    assert alone["ended_zset"] == len(MIX) and alone["history_index"] == [9, 1, 0]
    assert alone["outbox"] and alone["stats"]["completed"] == 9 and alone["stats"]["cancelled"] == 1


def test_a_take_that_meets_a_task_given_back_to_the_front_takes_it_next(client):
    """An expired locked task met in a take frees its lock's waiter to the front: it is taken before the rest of pending."""
    q = Queue("be-front")
    register(client, "be-front")
    first = q.enqueue("holder", lock="L")  # runnable head of L
    waiter = q.enqueue("waiter", lock="L")  # waits on L
    rest = q.enqueue_many(["a", "b"])
    # the head expires: taking it frees L's turn, and the waiter goes to the front
    client.hset(keys.task_key("be-front", first), "ex", 1)
    started = commands.start("be-front", "w", 3, lock_ttl=LOCK_TTL, grace=GRACE, default_timeout=0, result_ttl=60).run(
        client
    )
    assert [t.id for t in started.tasks] == [waiter, *rest]
    leases = [t.lease for t in started.tasks]
    assert leases == [leases[0], leases[0] + 1, leases[0] + 2]
    assert int(client.get(keys.queue_key("be-front", "leases"))) == leases[-1]


def test_a_chunk_drain_runs_a_few_redis_commands_per_task(client, workers):
    """chunk=100: draining 3,000 queued tasks runs at most 7 Redis commands per task, the scripts' own included (24 before they were batched)."""
    Queue("batch-chunk").enqueue_many(["x"] * 3000)
    before = {k: v["calls"] for k, v in client.info("commandstats").items()}
    w = workers(["batch-chunk"], concurrency=1, name="chunk-commands")
    wait_for(
        lambda: completed(client, "batch-chunk") >= 3000, timeout=120, interval=0.2, message=lambda: w.output()[-2000:]
    )
    calls = {k: v["calls"] - before.get(k, 0) for k, v in client.info("commandstats").items()}
    w.close()
    per_task = sum(calls.values()) / 3000
    most = sorted(((n / 3000, k[8:]) for k, n in calls.items() if n), reverse=True)[:8]
    print(f"batch-chunk: Redis commands per task {per_task:.2f}:", ", ".join(f"{k} {n:.2f}" for n, k in most))
    assert completed(client, "batch-chunk") == 3000
    assert per_task <= 7, most
