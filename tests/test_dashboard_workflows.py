"""The dashboard's workflow views: blocked tasks on the queue page, parents and children on the
task page, the Batches page and a batch's page (server-rendered, and their live feeds)."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues.dashboard import feeds, sections
from queues.engine import Batch, Queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    user = User.objects.create_superuser("admin", "a@example.com", "pw")
    c = Client()
    c.force_login(user)
    return c


def test_queue_page_lists_blocked_tasks_and_task_page_shows_relatives(staff, client):
    """A blocked task is listed on its queue's page; the task page shows its parent and the parent its child."""
    a = Queue("t1").enqueue("p")
    b = Queue("t2").enqueue("c", after=[a])
    page = staff.get("/queues/q/t2/").content.decode()
    assert "Blocked (" in page and b in page and "0 of 1 parent" not in page and "1 of 1 parent" in page
    child_page = staff.get(f"/queues/task/{b}/").content.decode()
    assert "Parents and children" in child_page and a in child_page
    parent_page = staff.get(f"/queues/task/{a}/").content.decode()
    assert b in parent_page and "blocked" in parent_page


def test_batches_page_and_batch_page(staff, client):
    """The Batches page shows each batch's progress; a batch's page lists its tasks; bad ids are refused."""
    b = Batch(description="nightly import", on_complete=("audit", "done"))
    ids = b.enqueue_many("t1", ["a", "b"])
    page = staff.get("/queues/batches/").content.decode()
    assert b.id in page and "nightly import" in page and "wq-bprogress" in page
    one = staff.get(f"/queues/batches/{b.id}/").content.decode()
    assert all(i in one for i in ids) and "audit: done" in one
    assert staff.get("/queues/batches/nope/").status_code == 400
    assert staff.get("/queues/batches/b-0000000000000000/").status_code == 404


def test_batch_feeds_render_their_sections(client):
    """The live feeds of the batch views build snapshots their sections render, and filter events."""
    b = Batch(description="d")
    b.enqueue("t1", "x")
    feed = feeds.feed_for(client, "batch", b.id)
    html = sections.render(feed.snapshot(), ["batch", "batch_tasks"], set())
    assert "wq-bprogress" in html["batch"] and "t1" in html["batch_tasks"]
    assert feed.wants(f'{{"e":"progress","b":"{b.id}"}}'.encode())
    assert not feed.wants(b'{"e":"progress","b":"b-0000000000000000"}')
    listing = feeds.feed_for(client, "batches")
    assert b.id in sections.render(listing.snapshot(), ["batches"], set())["batches"]


def test_a_child_cancelled_by_its_parent_shows_why_on_its_page(staff, client):
    """A child cancelled because its parent failed has a page saying so, naming the parent (not a 404)."""
    from queues.engine import workflows
    from tests.engine_calls import fail, take

    a = Queue("t1").enqueue("p", retries=0)
    b = Queue("t2").enqueue("c", after=[a])
    (t,) = take(client, "t1")
    fail(client, t)
    workflows.drain(client, "t1")
    r = staff.get(f"/queues/task/{b}/")
    assert r.status_code == 200
    page = r.content.decode()
    assert f"cancelled</span>: parent {a} failed." in page
    assert "Parents and children" in page and f"/queues/task/{a}/" in page  # the parent, linked
    known = Queue("t2").enqueue("x")
    unknown = known[:-1] + ("1" if known[-1] == "0" else "0")  # a well-formed id no task has
    assert staff.get(f"/queues/task/{unknown}/").status_code == 404  # unknown: still 404
