"""Enqueues whose reply is lost (issue 31): a proxy between the producer and Redis takes the reply to
a call Redis applied (``chaos.proxy``), the task runs to its end meanwhile, and the
producer's retry must add nothing; ``RedisUnavailable`` says which ids may have been added and
which were not, within ``ENQUEUE_RETRY_FOR`` + one ``ENQUEUE_SOCKET_TIMEOUT``."""

import time

import pytest

from chaos.proxy import Proxy
from queues.conf import build_config
from queues.engine import Batch, Connection, Queue, RedisUnavailable, connection, keys
from queues.engine.queue import new_task_id
from queues.testing import free_port
from tests import engine_calls
from tests.conftest import ON_CLUSTER
from tests.tasksapp import tasks

pytestmark = pytest.mark.skipif(ON_CLUSTER, reason="the proxy stands in front of one redis-server")


@pytest.fixture
def proxy(redis_server):
    p = Proxy(redis_server.port).start()
    yield p
    p.stop()


def _through(proxy, **settings):
    """A Connection to the test Redis through ``proxy``, with these settings."""
    config = build_config().with_(**settings)
    return Connection(proxy.url, config)


def _run_to_the_end(client, queue, n=1):
    """What a worker does meanwhile: take the tasks and complete them."""

    def run():
        for task in engine_calls.take(client, queue, count=n):
            engine_calls.finish(client, task)

    return run


def _warm(conn, queue):
    """Load the scripts and open a connection first (a first call's NOSCRIPT is not the fault tested),
    and make ``queue`` (the first call into a new queue only learns it does not exist: MAX_QUEUES),
    with its counters back at zero."""
    warm = Queue(f"{queue}-warm", conn)
    warm.enqueue_many(["warm"])
    warm.enqueue("warm")
    made = Queue(queue)
    made.enqueue("made")
    _run_to_the_end(made.client, queue)()
    made.client.delete(keys.queue_key(queue, "stats"))


@pytest.mark.parametrize("mode", ["reset", "drop"])
def test_a_lost_reply_to_a_plain_enqueue_runs_the_task_once(client, proxy, mode):
    """The reply to an applied enqueue is lost and the task completes before the retry: the retry adds nothing."""
    conn = _through(proxy, enqueue_retry_for=8.0)
    _warm(conn, "lost1")
    proxy.lose_replies(every=1, limit=1, mode=mode, match=b"EVALSHA", on_lost=_run_to_the_end(client, "lost1"))
    task_id = Queue("lost1", conn).enqueue("once")
    counts = Queue("lost1").counts()
    assert proxy.lost == 1
    assert (counts["enqueued"], counts["completed"], counts["pending"]) == (1, 1, 0), counts
    assert Queue("lost1").get(task_id) is None  # the task that ran is the one whose id came back


@pytest.mark.parametrize("options", [{}, {"retries": 2}, {"unique": True}, {"lock": "L"}, {"tags": ["a"]}])
def test_a_lost_reply_to_enqueue_many_runs_each_task_once(client, proxy, options):
    """enqueue_many with options: its tasks completed before the retry are not added again."""
    conn = _through(proxy, enqueue_retry_for=5.0)
    _warm(conn, "lost2")
    n = 1 if options.get("lock") else 3  # one task of a lock may run at a time
    proxy.lose_replies(every=1, limit=1, match=b"EVALSHA", on_lost=_run_to_the_end(client, "lost2", n))
    ids = Queue("lost2", conn).enqueue_many([f"p{i}" for i in range(n)], **options)
    counts = Queue("lost2").counts()
    assert (counts["enqueued"], counts["completed"], counts["pending"]) == (n, n, 0), (counts, ids)


def test_a_lost_reply_to_a_batch_s_enqueue_runs_its_tasks_once(client, proxy):
    """A batch's tasks (their ids reserved in the batch first) are not added twice either."""
    conn = _through(proxy, enqueue_retry_for=5.0)
    _warm(conn, "lost3")
    batch = Batch(connection=conn)
    proxy.lose_replies(every=1, limit=1, match=b"{lost3}:pending", on_lost=_run_to_the_end(client, "lost3", 2))
    ids = batch.enqueue_many("lost3", ["a", "b"])
    counts = Queue("lost3").counts()
    assert (counts["enqueued"], counts["completed"]) == (2, 2), (counts, ids)
    assert Batch.get(batch.id)["total"] == 2


def test_a_lost_reply_to_the_tasks_backend_runs_its_task_once(client, proxy):
    """The Django Tasks backend's enqueue (ids made there) is not added twice after a lost reply."""
    conn = connection.configure(build_config().with_(enqueue_retry_for=5.0), proxy.url)
    _warm(conn, "dt-default")
    proxy.lose_replies(every=1, limit=1, match=b"EVALSHA", on_lost=_run_to_the_end(client, "dt-default"))
    result = tasks.add.enqueue(1, 2)
    counts = Queue("dt-default").counts()
    assert (counts["enqueued"], counts["completed"]) == (1, 1), (counts, result.id)


def test_every_reply_lost_says_the_ids_may_have_been_added_and_returns_in_time(client, proxy):
    """Replies lost for good: RedisUnavailable lists the id as unknown (none as not added) within the bound."""
    retry_for, socket_timeout = 0.6, 0.4
    conn = _through(proxy, enqueue_retry_for=retry_for, enqueue_socket_timeout=socket_timeout)
    _warm(conn, "lost4")
    proxy.lose_replies(every=1, mode="drop", match=b"EVALSHA")
    start = time.monotonic()
    with pytest.raises(RedisUnavailable) as caught:
        Queue("lost4", conn).enqueue("maybe")
    took = time.monotonic() - start
    exc = caught.value
    (task_id,) = exc.unknown
    assert exc.not_added == [] and exc.added == [] and exc.queue == "lost4"
    assert "1 may have been added" in str(exc) and task_id in str(exc)
    assert took < retry_for + socket_timeout + 0.5, took
    assert Queue("lost4").get(task_id).payload == "maybe"  # it was: Redis applied every try
    assert Queue("lost4").counts()["enqueued"] == 1


def test_redis_down_says_no_id_was_added(client):
    """Nobody listening: every id is certainly not added, none unknown, and the error says so."""
    config = build_config().with_(enqueue_retry_for=0.3)
    q = Queue("down1", Connection(f"redis://127.0.0.1:{free_port()}/0", config))
    with pytest.raises(RedisUnavailable) as caught:
        q.enqueue_many(["a", "b"], ids=[new_task_id("down1"), new_task_id("down1")])
    exc = caught.value
    assert len(exc.not_added) == 2 and exc.unknown == [] and exc.added == []
    assert "2 not added" in str(exc)
    with pytest.raises(RedisUnavailable) as caught:
        q.enqueue("c")
    assert len(caught.value.not_added) == 1 and caught.value.unknown == []
    assert not client.exists(keys.queue_key("down1", "pending"))


def test_a_call_of_three_sends_tells_added_unknown_and_not_added_apart(client, proxy):
    """1,200 tasks (calls of 500): the second call's replies are lost for good: 500 added, 500 unknown, 200 not added."""
    conn = _through(proxy, enqueue_retry_for=0.5, enqueue_socket_timeout=0.3)
    _warm(conn, "lost5")
    payloads = [f"p{i}" for i in range(1200)]
    ids = [new_task_id("lost5") for _ in payloads]
    proxy.lose_replies(every=1, mode="reset", match=b"\r\np700\r\n")  # only the second call carries it
    with pytest.raises(RedisUnavailable) as caught:
        Queue("lost5", conn).enqueue_many(payloads, ids=ids)
    exc = caught.value
    assert (exc.added, exc.unknown, exc.not_added) == (ids[:500], ids[500:1000], ids[1000:])
    assert "500 added, 500 may have been added" in str(exc) and "200 not added" in str(exc)
    assert Queue("lost5").counts()["pending"] == 1000  # the second call was run, the third never sent
    proxy.lose_replies()
    assert Queue("lost5", conn).enqueue_many(payloads, ids=ids) == ids  # settling them: the rest goes in
    assert Queue("lost5").counts()["enqueued"] == 1200


def test_enqueues_cost_no_memory_per_pending_task_for_idempotence(client):
    """Fresh ids are found by their task while it exists: no `seen` entry; one `resend` entry per producer setting."""
    q = Queue("mem1")
    q.enqueue_many(["x"] * 1200)
    for _ in range(50):
        q.enqueue("y")
    assert not client.exists(keys.queue_key("mem1", "seen"))
    assert client.zcard(keys.queue_key("mem1", "resend")) == 1
    other = Queue("mem1", Connection(q.connection.url, build_config().with_(enqueue_retry_for=30.0)))
    other.enqueue("z")
    windows = sorted(int(w) for w in client.zrange(keys.queue_key("mem1", "resend"), 0, -1))
    assert windows == [6000, 34000]  # ENQUEUE_RETRY_FOR + 1 s connect + 2 s reply + 1 s margin, in whole seconds
    until = {int(w): int(t) for w, t in client.zrange(keys.queue_key("mem1", "resend"), 0, -1, withscores=True)}
    now = int(client.time()[0]) * 1000
    assert now + 6000 - 2000 < until[6000] <= now + 2 * 6000 + 1000  # held twice the window, written once in it


@pytest.fixture
def ended_max_2(monkeypatch):
    """The scripts built with keys.ENDED_MAX = 2 (built again as they were afterwards)."""
    from queues.engine import scripts

    monkeypatch.setattr(keys, "ENDED_MAX", 2)
    scripts.get.cache_clear()
    scripts._keys_and_head.cache_clear()
    yield
    monkeypatch.undo()
    scripts.get.cache_clear()
    scripts._keys_and_head.cache_clear()


def test_tasks_that_end_within_the_window_stay_beyond_the_record_s_bound(client, ended_max_2):
    """More tasks end than ENDED_MAX while a producer may send again: every one stays remembered, then the record shrinks."""
    q = Queue("win1")
    ids = q.enqueue_many(["1", "2", "3", "4", "5"])
    for _ in ids:
        engine_calls.finish(client, engine_calls.take(client, "win1")[0])
    assert client.zcard(keys.queue_key("win1", "ended")) == 5
    assert q.enqueue_many(["again"] * 5, ids=ids) == ids  # each ended: nothing added
    assert q.counts()["enqueued"] == 5 and q.counts()["pending"] == 0
    q.enqueue("6")
    client.delete(keys.queue_key("win1", "resend"))  # the producer's window passed
    engine_calls.finish(client, engine_calls.take(client, "win1")[0])
    assert client.zcard(keys.queue_key("win1", "ended")) <= 3  # the last ENDED_MAX, and the one just added


def test_enqueue_socket_timeout_out_of_range_is_a_clear_error():
    """ENQUEUE_SOCKET_TIMEOUT must be 0.05 to 60 s; the enqueue client waits it, plus the replicas' wait."""
    from queues.engine import Config, ConfigurationError

    for bad in (0, 0.01, 61, -1):
        with pytest.raises(ConfigurationError, match="ENQUEUE_SOCKET_TIMEOUT"):
            Config.from_mapping({"ENQUEUE_SOCKET_TIMEOUT": bad})
    config = Config.from_mapping({"ENQUEUE_SOCKET_TIMEOUT": 0.5, "MIN_REPLICAS_ACK": 1, "REPLICAS_ACK_TIMEOUT": 2})
    conn = Connection("redis://127.0.0.1:1/0", config)
    assert conn.enqueue_client.connection_pool.connection_kwargs["socket_timeout"] == 2.5
    assert conn.enqueue_client.connection_pool.connection_kwargs["socket_connect_timeout"] == 0.5


def test_lost_replies_to_an_after_enqueue_link_and_add_the_child_once(client, proxy):
    """enqueue(after=): the replies to its link and to its enqueue are both lost; the child is added and runs once."""
    conn = _through(proxy, enqueue_retry_for=5.0)
    _warm(conn, "lost6")
    parent = Queue("lost6p").enqueue("parent")
    engine_calls.finish(client, engine_calls.take(client, "lost6p")[0])

    def then_the_enqueue_s():  # the link's reply is lost first, then the enqueue's, the child run meanwhile
        run = _run_to_the_end(client, "lost6")
        proxy.lose_replies(every=1, limit=2, match=b"{lost6}:pending", on_lost=run)

    proxy.lose_replies(every=1, limit=1, match=b"{lost6p}", on_lost=then_the_enqueue_s)
    child = Queue("lost6", conn).enqueue("child", after=[parent])
    counts = Queue("lost6").counts()
    assert proxy.lost == 2 and (counts["enqueued"], counts["completed"]) == (1, 1), (counts, child)


def test_an_after_enqueue_with_redis_down_says_nothing_was_added(client):
    """Redis unreachable at the link step: RedisUnavailable lists every id as not added, within the retry window."""
    parent = Queue("down2p").enqueue("parent")
    config = build_config().with_(enqueue_retry_for=0.3)
    q = Queue("down2", Connection(f"redis://127.0.0.1:{free_port()}/0", config))
    start = time.monotonic()
    with pytest.raises(RedisUnavailable) as caught:
        q.enqueue_many(["a", "b"], after=[parent])
    assert len(caught.value.not_added) == 2 and caught.value.unknown == [] and time.monotonic() - start < 3
