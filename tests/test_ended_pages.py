"""Ended tasks on the dashboard: the task page shows a completed or cancelled task's record,
search finds them by ``state:completed`` / ``state:cancelled``, and "Run again" enqueues a new
task like it (rights, CSRF and audit as every action)."""

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import commands, history, readmodel
from queues.models import AuditLog
from tests.engine_calls import take
from tests.test_dashboard_views import make_user


@pytest.fixture
def web():
    return Client()


def _complete(client, queue, payload, worker="w", **options):
    tid = Queue(queue).enqueue(payload, **options)
    (task,) = take(client, queue, worker=worker)
    commands.progress(queue, [(task.id, task.lease, 1.0, "all done", ["first line", "last line"])]).run(client)
    commands.finish(queue, worker, [(task.id, task.lease, "", False)], result_ttl=0).run(client)
    return tid


def test_a_completed_tasks_page_shows_its_record(client, db, web):
    """A completed task's page shows its record: state, payload, worker, retries, last log lines; its log view gives them."""
    tid = _complete(client, "ep1", "the payload", worker="w-9", retries=3)
    web.force_login(make_user("v", perms=["view_dashboard"]))
    html = web.get(reverse("queues:task", args=[tid])).content.decode()
    assert "wq-state-completed" in html and "This task ended" in html
    assert "the payload" in html and "last line" in html and "w-9" in html
    assert "retries allowed: 3" in html
    assert "Run again" not in html  # no enqueue_task permission: no button
    log = web.get(reverse("queues:task-log", args=[tid])).content.decode()
    assert log == "first line\nlast line\n"


def test_search_finds_completed_and_cancelled_tasks(client, db, web):
    """state:completed and state:cancelled (and words) find ended tasks from their record, with totals; the page lists them."""
    done = _complete(client, "ep2", "done one")
    cancelled = Queue("ep2").enqueue("cancel me")
    assert Queue("ep2").cancel(cancelled)
    page = readmodel.search(client, "queue:ep2 state:completed")
    assert [t.id for t in page.tasks] == [done] and page.total == 1
    page = readmodel.search(client, "queue:ep2 state:cancelled")
    assert [t.id for t in page.tasks] == [cancelled] and page.tasks[0].state == "cancelled"
    assert readmodel.search(client, "queue:ep2 cancel").tasks[0].id == cancelled
    web.force_login(make_user("v", perms=["view_dashboard"]))
    html = web.get(reverse("queues:search"), {"q": "state:cancelled queue:ep2"}).content.decode()
    assert cancelled in html


def test_run_again_enqueues_a_like_task_linked_to_the_old_one(client, db, web):
    """Run again makes a pending task with the same payload and options, linked both ways on the pages, audited."""
    old = _complete(client, "ep3", "again!", retries=2, timeout=7, tags=["t-1"], meta="m")
    user = make_user("op", perms=["view_dashboard", "enqueue_task"])
    web.force_login(user)
    html = web.get(reverse("queues:task", args=[old])).content.decode()
    assert "Run again" in html
    r = web.post(reverse("queues:task-run-again", args=[old]), HTTP_ACCEPT="application/json")
    assert r.status_code == 200, r.content
    new = r.json()["message"].split(" as ")[1].rstrip(".")
    task = readmodel.task(client, new)
    assert task.state == "pending" and task.payload == "again!"
    assert (task.retries, task.timeout, task.tags, task.meta) == (2, 7, ["t-1"], "m")
    assert readmodel.again_of(client, new) == old
    page = web.get(reverse("queues:task", args=[new])).content.decode()
    assert "Run again of" in page and old in page
    row = AuditLog.objects.get(action="run_again")
    assert (row.user, row.task_id, row.queue) == (user, old, "ep3")


def test_run_again_rights_csrf_and_refusals(client, db):
    """Run again needs enqueue_task, POST and CSRF; a live task is 409, an unknown one 404, a bad id 400, nothing enqueued."""
    old = _complete(client, "ep4", "x")
    url = reverse("queues:task-run-again", args=[old])
    web = Client()
    web.force_login(make_user("v", perms=["view_dashboard"]))
    assert web.post(url).status_code == 403
    assert web.get(url).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("op", perms=["view_dashboard", "enqueue_task"]))
    assert strict.post(url).status_code == 403  # no CSRF token
    assert AuditLog.objects.count() == 0
    op = Client()
    op.force_login(make_user("op2", perms=["view_dashboard", "enqueue_task"]))
    live = Queue("ep4").enqueue("still pending")
    r = op.post(reverse("queues:task-run-again", args=[live]), HTTP_ACCEPT="application/json")
    assert r.status_code == 409 and "has not ended" in r.json()["message"]
    r = op.post(reverse("queues:task-run-again", args=["ep4-00000000000000aa"]), HTTP_ACCEPT="application/json")
    assert r.status_code == 404
    r = op.post(reverse("queues:task-run-again", args=["no such id"]), HTTP_ACCEPT="application/json")
    assert r.status_code == 400
    assert readmodel.queue_counts(client, "ep4")["pending"] == 1


def test_a_payload_kept_in_part_is_not_run_again(client):
    """A task whose payload was kept only in part is not run again."""
    old = _complete(client, "ep5", "y" * 5000)
    assert history.run_again(client, [old]) == {old: "cut"}


def test_the_api_shows_an_ended_tasks_record(client, db):
    """GET /api/tasks/<id> of a completed task returns its record with its last log lines."""
    from tests.test_api import Api, make_token

    done = _complete(client, "ep6", "api payload", worker="w-3")
    api = Api(make_token("view_dashboard"))
    body = api.get(f"/api/tasks/{done}").json()
    assert (body["state"], body["payload"], body["worker"]) == ("completed", "api payload", "w-3")
    assert body["log"] == ["first line", "last line"] and body["finished_at"]
