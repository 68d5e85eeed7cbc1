"""Search: the query language, bounded scans with a cursor, and tag lookups through the index."""

from datetime import UTC, datetime

import pytest

from queues import Queue
from queues.engine import commands, readmodel
from queues.engine.readmodel import SearchError, parse_search


def test_parse_reads_every_qualifier_and_free_text():
    """Qualifiers, quoted values with spaces, and unknown prefixes kept as free text."""
    s = parse_search(
        'queue:emails state:failed error:"SMTP timeout" tag:customer:42 worker:host-1 '
        "before:2026-11-20 after:2026-11-19T12:00 hello http://x.y"
    )
    assert s.queues == ["emails"] and s.states == ["failed"] and s.errors == ["smtp timeout"]
    assert s.tags == ["customer:42"] and s.workers == ["host-1"]
    assert s.before_ms == int(datetime(2026, 11, 20, tzinfo=UTC).timestamp() * 1000)
    assert s.after_ms == int(datetime(2026, 11, 19, 12, tzinfo=UTC).timestamp() * 1000)
    assert s.words == ["hello", "http://x.y"]


@pytest.mark.parametrize("text", ["queue:{bad}", "state:sleeping", "before:yesterday", "after:2026-13-01", "x" * 1001])
def test_parse_refuses_bad_qualifiers(text):
    """A bad queue name, state or date is a SearchError with a message."""
    with pytest.raises(SearchError):
        parse_search(text)


def test_tag_search_reads_only_the_index(client, conn):
    """tag: looks at the tagged tasks only, whatever the queue's size, and knows its total."""
    q = Queue("s1", conn)
    q.enqueue_many([f"noise {i}" for i in range(3000)])
    ids = q.enqueue_many(["a", "b", "c"], tags=["customer:42"])
    page = readmodel.search(client, "tag:customer:42")
    assert sorted(t.id for t in page.tasks) == sorted(ids)
    assert page.scanned == 3 and page.total == 3 and page.cursor is None


def test_free_text_is_bounded_and_goes_on_with_a_cursor(client, conn):
    """A free-text search looks at SCAN_LIMIT entries per call; the cursor finds the rest."""
    q = Queue("s2", conn)
    q.enqueue_many([f"noise {i}" for i in range(1200)])
    wanted = q.enqueue_many(['{"to": "needle@example.com"}'] * 3)
    page = readmodel.search(client, "queue:s2 needle", scan_limit=1000)
    assert page.tasks == [] and page.scanned == 1000 and page.cursor
    page = readmodel.search(client, "queue:s2 needle", cursor=page.cursor, scan_limit=1000)
    assert [t.id for t in page.tasks] == wanted and page.cursor is None


@pytest.mark.parametrize(
    "cursor", ["0.9223372036854775807", "0.99999999999999999999", "１.0", "0.-1", "0.1.2", "-1.0", "10.0"]
)
def test_a_cursor_that_is_not_one_is_refused_before_redis_sees_it(client, conn, cursor):
    """A cursor past Redis's 64-bit range, with non-ASCII digits or past the last source is a SearchError."""
    Queue("s3", conn).enqueue("hello")
    with pytest.raises(readmodel.SearchError, match="is not a search cursor"):
        readmodel.search(client, "queue:s3 hello", cursor=cursor)


def test_a_full_page_stops_right_after_its_last_match(client, conn):
    """With page_size matches found, the cursor goes on from the next entry: nothing is skipped."""
    q = Queue("s3", conn)
    ids = q.enqueue_many([f"match {i}" for i in range(7)])
    seen, cursor = [], None
    while True:
        page = readmodel.search(client, "queue:s3 match", cursor=cursor, page_size=3)
        seen += [t.id for t in page.tasks]
        if not page.cursor:
            break
        cursor = page.cursor
    assert seen == ids


def test_state_error_worker_and_dates_filter(client, conn):
    """state:, error:, worker:, before: and after: narrow the results."""
    q = Queue("s4", conn)
    failed_id = q.enqueue("will fail", retries=0)
    q.enqueue("stays", delay=60)
    commands.register("s4", "host-1", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
    t = commands.start("s4", "host-1", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client).tasks[0]
    commands.fail(
        "s4",
        "host-1",
        t.id,
        t.lease,
        "SMTPError: timed out",
        "",
        retries=0,
        backoff=0,
        backoff_max=0,
        jitter=0,
        history=5,
    ).run(client)
    assert [x.id for x in readmodel.search(client, 'queue:s4 error:"smtperror"').tasks] == [failed_id]
    assert [x.id for x in readmodel.search(client, "queue:s4 state:failed worker:host-1").tasks] == [failed_id]
    assert readmodel.search(client, "queue:s4 worker:host-2").tasks == []
    assert [x.id for x in readmodel.search(client, "queue:s4 worker:host").tasks] == [failed_id]  # its start
    assert len(readmodel.search(client, "queue:s4 state:delayed").tasks) == 1
    assert readmodel.search(client, "queue:s4 state:delayed").total == 1
    assert readmodel.search(client, "queue:s4 before:2000-01-01").tasks == []
    assert len(readmodel.search(client, "queue:s4 after:2000-01-01").tasks) == 2


def test_bulk_engine_cancels_retries_and_deletes_in_batches(client, conn):
    """bulk.find_ids finds every match across steps; bulk.apply counts only what changed."""
    from queues.engine import bulk

    q = Queue("s5", conn)
    pending = q.enqueue_many([f"p{i}" for i in range(1200)], tags=["bulk"])
    found = bulk.find_ids(client, "tag:bulk", scan_limit=500)
    assert sorted(found) == sorted(pending)
    steps = []
    assert bulk.apply(client, "cancel", found[:700], progress=lambda *a: steps.append(a)) == 700
    assert steps[-1] == ("acting", 700, 700, 700) and len(steps) == 2  # two batches
    assert bulk.apply(client, "retry", found[700:]) == 0  # not failed: nothing changes
    assert bulk.apply(client, "delete", [*found[700:], "s5-0000000000000000"]) == 500
    assert q.counts()["pending"] == 0 and tag_keys_of(client, "s5") == []
    with pytest.raises(ValueError):
        bulk.apply(client, "explode", [])


def tag_keys_of(client, queue):
    return list(client.scan_iter(match=f"worqr:{{{queue}}}:tag:*"))


def test_state_blocked_finds_tasks_waiting_for_parents(client):
    """state:blocked lists the tasks enqueued with after= whose parents have not completed."""
    a = Queue("sb").enqueue("parent")
    b = Queue("sb").enqueue("child", after=[a])
    page = readmodel.search(client, "queue:sb state:blocked")
    assert [t.id for t in page.tasks] == [b]
