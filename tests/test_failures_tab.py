"""The Failures tab: failed tasks of every queue grouped by error shape, newest group first,
with retry and delete for a group (the bulk actions' rights)."""

import time

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import readmodel
from tests.engine_calls import fail, take
from tests.test_dashboard_search import wait_job
from tests.test_dashboard_views import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def _fail(client, queue, errors):
    Queue(queue).enqueue_many([f"p{i}" for i in range(len(errors))])
    tasks = take(client, queue, count=len(errors))
    for task, error in zip(tasks, errors):
        time.sleep(0.002)  # each its own millisecond: "newest first" is then the order they failed
        fail(client, task, error=error)
    return [t.id for t in tasks]


def test_failures_of_every_queue_grouped_by_shape(client):
    """Failed tasks of two queues grouped by shape, newest group first; retry/delete per group only with the rights; a retry empties the group."""
    a = _fail(client, "ft-a", ["KeyError: 'user 1'", "KeyError: 'user 2'"])
    b = _fail(client, "ft-b", ["KeyError: 'user 3'", "TimeoutError: after 3 s"])
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    html = web.get(reverse("queues:failures")).content.decode()
    assert "4 failed tasks in 2 queues" in html
    groups = html.split('class="module wq-module wq-failure-group"')[1:]
    assert len(groups) == 2 and "TimeoutError" in groups[0]  # seen last: first
    assert "3</span> KeyError" in groups[1] and "1</span> TimeoutError" in groups[0]
    assert all(i in groups[1] for i in (*a, b[0])) and b[1] in groups[0]
    assert "Retry these" not in html  # a viewer: no actions
    op = Client()
    op.force_login(make_user("op", perms=["view_dashboard", "retry_task", "delete_task"]))
    html = op.get(reverse("queues:failures")).content.decode()
    assert "Retry these 3" in html and "Delete these 1" in html
    r = op.post(
        reverse("queues:bulk-start"),
        {"action": "retry", "confirm": "yes", "ids": [*a, b[0]]},
        HTTP_ACCEPT="application/json",
    )
    assert r.status_code == 202
    assert wait_job(op, r.json()["url"])["changed"] == 3
    assert readmodel.failed_all(client).counts == {"ft-b": 1}
    html = op.get(reverse("queues:failures")).content.decode()
    assert "1 failed task in 1 queue" in html and "KeyError" not in html


def test_no_failure_says_so(client, db):
    """With nothing failed the tab says so."""
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    assert "No task has failed for good." in web.get(reverse("queues:failures")).content.decode()


def test_the_tab_is_for_staff_with_view_dashboard(client, db):
    """Anonymous users go to the login page; a non-staff user gets 403."""
    url = reverse("queues:failures")
    assert Client().get(url).status_code == 302  # to the login page
    web = Client()
    web.force_login(make_user("not-staff", staff=False, perms=["view_dashboard"]))
    assert web.get(url).status_code == 403
