"""Bulk "Run again" over a search of ended tasks: one new task per ended one, audited once,
refused without queues.enqueue_task."""

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import commands, readmodel
from queues.models import AuditLog
from tests.engine_calls import take
from tests.test_dashboard_search import wait_job
from tests.test_dashboard_views import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_bulk_run_again_over_a_search(client):
    """Bulk Run again over all matching completed tasks: refused without enqueue_task, then one new task per ended one, linked, one audit row."""
    q = Queue("eb1")
    q.enqueue_many([f"job {i}" for i in range(5)])
    for task in take(client, "eb1", count=5):
        commands.finish("eb1", "w", [(task.id, task.lease, "", False)], result_ttl=0).run(client)
    viewer = Client()
    viewer.force_login(make_user("viewer", perms=["view_dashboard"]))
    html = viewer.get(reverse("queues:search"), {"q": "queue:eb1 state:completed"}).content.decode()
    assert "Run again" not in html
    r = viewer.post(
        reverse("queues:bulk-start"),
        {"action": "again", "confirm": "yes", "all": "1", "q": "queue:eb1 state:completed"},
        HTTP_ACCEPT="application/json",
    )
    assert r.status_code == 403 and "enqueue_task" in r.json()["message"]
    op = Client()
    user = make_user("op", perms=["view_dashboard", "enqueue_task"])
    op.force_login(user)
    html = op.get(reverse("queues:search"), {"q": "queue:eb1 state:completed"}).content.decode()
    assert 'data-bulk="again">Run again</button>' in html
    r = op.post(
        reverse("queues:bulk-start"),
        {"action": "again", "confirm": "yes", "all": "1", "q": "queue:eb1 state:completed"},
        HTTP_ACCEPT="application/json",
    )
    assert r.status_code == 202, r.content
    job = wait_job(op, r.json()["url"])
    assert (job["phase"], job["changed"], job["total"]) == ("done", 5, 5)
    pending = readmodel.pending(client, "eb1")
    assert sorted(t.payload for t in pending) == [f"job {i}" for i in range(5)]
    assert all(readmodel.again_of(client, t.id) for t in pending)
    (row,) = AuditLog.objects.filter(action="bulk_again")
    assert "5 of 5 run again" in row.detail and row.user == user
