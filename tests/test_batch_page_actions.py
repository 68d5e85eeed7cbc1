"""A batch's page: its tasks filtered by state (?state=failed), its counts in words, Cancel (its
unfinished tasks) and Retry (its failed tasks), each behind its right, CSRF-checked and audited."""

import pytest
from django.test import Client
from django.urls import reverse

from queues.engine import Batch, readmodel, workflows
from queues.models import AuditLog
from tests.engine_calls import fail, finish, take
from tests.support.dashboard import make_user

pytestmark = pytest.mark.django_db(transaction=True)

JSON = {"HTTP_ACCEPT": "application/json"}


def _batch(client, queue):
    """A closed batch of 6: 2 failed, 1 completed, 1 running, 1 pending, 1 delayed."""
    b = Batch(description="mixed")
    ids = b.enqueue_many(queue, ["f1", "f2", "ok", "run", "wait"])
    later = b.enqueue(queue, "later", delay=3600)
    b.close()
    tasks = take(client, queue, count=4)
    for t in tasks:
        if t.payload in ("f1", "f2"):
            fail(client, t)
        elif t.payload == "ok":
            finish(client, t)
    workflows.drain_all(client, queue)
    return b, ids, later


def _web(username, *perms):
    web = Client()
    web.force_login(make_user(username, perms=["view_dashboard", *perms]))
    return web


def test_batch_page_filters_by_state_and_reads_in_words(client):
    """?state=failed lists only the failed tasks; the counts read as words; a bad state is refused."""
    b, ids, _ = _batch(client, "bp1")
    web = _web("looker")
    page = web.get(reverse("queues:batch", args=[b.id]) + "?state=failed").content.decode()
    assert ids[0] in page and ids[1] in page and ids[2] not in page and ids[3] not in page
    whole = web.get(reverse("queues:batch", args=[b.id])).content.decode()
    assert "1 completed, 2 failed" in whole
    assert "running" in whole and "finished_with_failures" not in whole
    assert web.get(reverse("queues:batch", args=[b.id]) + "?state=nope").status_code == 400
    assert web.get(reverse("queues:batch", args=[b.id]) + "?state=failed&from=x").status_code == 400


def test_cancel_and_retry_a_batch(client):
    """Cancel removes the pending and delayed tasks and stops the running one; Retry queues the failed ones again."""
    b, ids, later = _batch(client, "bp2")
    web = _web("boss", "cancel_task", "retry_task", "purge_queue", "retry_all_failed")
    html = web.get(reverse("queues:batch", args=[b.id])).content.decode()
    assert reverse("queues:batch-cancel", args=[b.id]) in html and reverse("queues:batch-retry", args=[b.id]) in html
    assert web.post(reverse("queues:batch-cancel", args=[b.id]), **JSON).status_code == 400  # not confirmed
    r = web.post(reverse("queues:batch-cancel", args=[b.id]), {"confirm": "yes"}, **JSON)
    assert r.status_code == 200 and "3 unfinished tasks cancelled" in r.json()["message"], r.content
    assert readmodel.task(client, ids[4]) is None and readmodel.task(client, later) is None
    assert readmodel.task(client, ids[3]).cancel_requested  # the running one: its worker is told to stop
    r = web.post(reverse("queues:batch-retry", args=[b.id]), **JSON)
    assert r.status_code == 200 and "2 failed tasks queued again" in r.json()["message"], r.content
    assert {readmodel.task(client, i).state for i in ids[:2]} == {"pending"}
    assert [a.action for a in AuditLog.objects.order_by("at")] == ["batch_cancel", "batch_retry"]


def test_batch_actions_need_their_rights_and_csrf(client):
    """A viewer sees neither button and is refused (403); a post without CSRF is refused; nothing changes."""
    b, ids, _ = _batch(client, "bp3")
    viewer = _web("viewer")
    html = viewer.get(reverse("queues:batch", args=[b.id])).content.decode()
    assert reverse("queues:batch-cancel", args=[b.id]) not in html
    for name in ("batch-cancel", "batch-retry"):
        assert viewer.post(reverse(f"queues:{name}", args=[b.id]), {"confirm": "yes"}).status_code == 403
        assert viewer.post(reverse(f"queues:{name}", args=[b.id]), {"confirm": "yes"}, **JSON).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(
        make_user("csrf-less", perms=["view_dashboard", "cancel_task", "retry_task", "purge_queue", "retry_all_failed"])
    )
    assert strict.post(reverse("queues:batch-cancel", args=[b.id]), {"confirm": "yes"}).status_code == 403
    assert readmodel.task(client, ids[4]).state == "pending" and readmodel.task(client, ids[0]).state == "failed"
    assert not AuditLog.objects.exists()


def test_batch_wide_actions_need_the_queue_wide_rights_on_the_page_and_the_api(client):
    """cancel_task or retry_task alone cannot act on a whole batch (page or API): that needs purge_queue or retry_all_failed."""
    from tests.support.api import Api, make_token

    b, ids, _ = _batch(client, "bp5")
    single = _web("single", "cancel_task", "retry_task")
    html = single.get(reverse("queues:batch", args=[b.id])).content.decode()
    assert reverse("queues:batch-cancel", args=[b.id]) not in html
    assert reverse("queues:batch-retry", args=[b.id]) not in html
    r = single.post(reverse("queues:batch-cancel", args=[b.id]), {"confirm": "yes"}, **JSON)
    assert r.status_code == 403 and "purge_queue" in r.json()["message"]
    r = single.post(reverse("queues:batch-retry", args=[b.id]), **JSON)
    assert r.status_code == 403 and "retry_all_failed" in r.json()["message"]
    token_api = Api(make_token("view_dashboard", "cancel_task", name="single-api"))
    r = token_api.delete(f"/api/batches/{b.id}")
    assert r.status_code == 403 and "purge_queue" in r.json()["error"]
    assert token_api.delete("/api/batches/no-such-batch").status_code == 403  # refused before the lookup
    assert readmodel.task(client, ids[4]).state == "pending" and readmodel.task(client, ids[0]).state == "failed"
    assert not AuditLog.objects.exists()
    both = _web("both", "cancel_task", "purge_queue")
    r = both.post(reverse("queues:batch-cancel", args=[b.id]), {"confirm": "yes"}, **JSON)
    assert r.status_code == 200 and readmodel.task(client, ids[4]) is None


def test_batch_actions_go_a_bounded_step_at_a_time(client):
    """Each call does at most its limit and says where to go on; called again, it finishes the job."""
    from queues.engine import batch_actions

    b = Batch()
    ids = b.enqueue_many("bp4", [f"t{i}" for i in range(7)])
    b.close()
    for t in take(client, "bp4", count=3):
        fail(client, t)
    workflows.drain_all(client, "bp4")
    assert batch_actions.retry_failed(client, b.id, 0, limit=2) == (2, 2)  # looked at 2, go on from 2
    assert batch_actions.retry_failed(client, b.id, 2, limit=2) == (1, 4)
    assert batch_actions.retry_failed(client, b.id, 4, limit=5) == (0, None)  # looked through
    assert batch_actions.cancel_unfinished(client, b.id, limit=3) == (3, True)  # the 4 never run
    assert batch_actions.cancel_unfinished(client, b.id, limit=3) == (1, False)
    assert all(readmodel.task(client, i) is None for i in ids[3:])
    # A failed task retried had ended already (it counts by its first end): Cancel leaves it.
    assert all(readmodel.task(client, i).state == "pending" for i in ids[:3])
