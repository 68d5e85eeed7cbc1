"""The queue page's reads in a few round trips (``readmodel.queue_page``) show exactly what the
one-list reads show: front and pending lists, partitions, delayed, blocked, failed, in process
and locks, on every page."""

from queues import Queue
from queues.engine import commands, readmodel
from queues.engine.registry import handler
from tests.engine_calls import fail, register, take


def _noop(task):
    return None


handler("qp-part", partition=lambda task: task.payload.split(":")[0])(_noop)
handler("qp-lock", lock=lambda task: task.payload.split(":")[0])(_noop)


def _ids(tasks):
    return [t.id for t in tasks]


def _same_as_one_list_reads(client, queue, per_page):
    """Every page of queue_page against pending/active/delayed/blocked/failed/locks."""
    pages = readmodel.queue_page(client, queue, 1, per_page)["pages"]
    assert pages == max(1, -(-readmodel.queue_counts(client, queue)["runnable"] // per_page))
    for page in range(1, pages + 2):  # and one past the last: brought back to the last
        read = readmodel.queue_page(client, queue, page, per_page)
        shown = min(page, pages)
        assert (read["page"], read["offset"]) == (shown, (shown - 1) * per_page)
        assert _ids(read["pending"]) == _ids(readmodel.pending(client, queue, read["offset"], per_page))
        assert _ids(read["active"]) == _ids(readmodel.active(client, queue))
        assert _ids(read["delayed"]) == _ids(readmodel.delayed(client, queue, 0, per_page))
        assert _ids(read["blocked"]) == _ids(readmodel.blocked(client, queue, 0, per_page))
        assert _ids(read["failed"]) == _ids(readmodel.failed(client, queue, 0, per_page))
        assert read["locks"] == readmodel.locks(client, queue)
        assert read["counts"] == readmodel.queue_counts(client, queue)


def test_front_pending_delayed_failed_and_active_match_the_one_list_reads(client):
    """Tasks given back to the front, pending ones, delayed, failed and in process."""
    # each page lists the same tasks in the same order as reading each list on its own.
    q = Queue("qp-plain")
    q.enqueue_many([f"t{i}" for i in range(23)])
    q.enqueue("later", delay=3600)
    register(client, "qp-plain")
    taken = take(client, "qp-plain", count=6)
    commands.stop("qp-plain", "w", [(t.id, t.lease, False) for t in taken[:3]]).run(client)  # to the front
    fail(client, taken[3])
    _same_as_one_list_reads(client, "qp-plain", per_page=5)
    front = readmodel.queue_page(client, "qp-plain", 1, 5)["pending"]
    assert _ids(front)[:3] == _ids(taken[:3])  # given back first in line


def test_partitions_and_locks_match_the_one_list_reads(client):
    """Tasks listed in partitions follow the plain pending ones page by page, and a held lock shows its holder ..."""
    # ... and its waiters, as the one-list reads show them.
    Queue("qp-part").enqueue_many([f"c{i % 4}:{i}" for i in range(30)])
    _same_as_one_list_reads(client, "qp-part", per_page=7)
    lq = Queue("qp-lock")
    lq.enqueue_many([f"k{i % 2}:{i}" for i in range(8)])
    register(client, "qp-lock")
    holders = take(client, "qp-lock", count=2)
    assert holders
    _same_as_one_list_reads(client, "qp-lock", per_page=3)
    locks = readmodel.queue_page(client, "qp-lock", 1, 3)["locks"]
    assert {lk["holder"] for lk in locks if lk["holder"]} == set(_ids(holders))
    assert sum(lk["waiting"] for lk in locks) >= 1


def test_an_empty_queue_has_one_empty_page(client):
    """A queue with nothing in it: page 1 of 1, every list empty."""
    Queue("qp-empty").enqueue("x")
    Queue("qp-empty").delete(readmodel.pending(client, "qp-empty")[0].id)
    read = readmodel.queue_page(client, "qp-empty", 3, 50)
    assert (read["page"], read["pages"], read["offset"]) == (1, 1, 0)
    assert read["pending"] == read["active"] == read["delayed"] == read["failed"] == read["locks"] == []
