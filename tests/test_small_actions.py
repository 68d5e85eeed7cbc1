"""The small actions of the dashboard: a delayed task's "Run now" (retry_task's right, audited,
refused once the task is no longer delayed, CSRF-checked) and a single Delete that asks first
(a confirmation page with its own CSRF-protected form when the page's script is not there)."""

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import readmodel
from queues.models import AuditLog
from tests.support.dashboard import failed_tasks, make_user

pytestmark = pytest.mark.django_db(transaction=True)

JSON = {"HTTP_ACCEPT": "application/json"}


def _web(username, *perms):
    web = Client()
    web.force_login(make_user(username, perms=["view_dashboard", *perms]))
    return web


def test_run_now_moves_a_delayed_task_first_audited(client):
    """Run now on the queue page: the delayed task is pending and first; the audit log names who did it."""
    q = Queue("rn-dash")
    q.enqueue("a")
    later = q.enqueue("later", delay=3600)
    web = _web("runner", "retry_task")
    url = reverse("queues:task-run-now", args=[later])
    assert url in web.get(reverse("queues:queue", args=["rn-dash"]) + "?tab=delayed").content.decode()
    assert url in web.get(reverse("queues:task", args=[later])).content.decode()  # and on the task's page
    r = web.post(url, {"next": "/queues/q/rn-dash/?tab=delayed"})
    assert r.status_code == 302 and r["Location"] == "/queues/q/rn-dash/?tab=delayed"
    assert readmodel.task(client, later).state == "pending"
    assert readmodel.pending(client, "rn-dash", 0, 1)[0].id == later  # ahead of the one pending before
    entry = AuditLog.objects.get()
    assert (entry.user.username, entry.action, entry.task_id) == ("runner", "run_now", later)
    again = web.post(url, **JSON)  # no longer delayed
    assert again.status_code == 409 and "not delayed" in again.json()["message"]
    assert AuditLog.objects.count() == 1


def test_run_now_refused_without_the_right_and_without_csrf(client):
    """A viewer sees no Run now and is refused (403) by the form's address; a post without CSRF is refused."""
    later = Queue("rn-rights").enqueue("later", delay=3600)
    url = reverse("queues:task-run-now", args=[later])
    viewer = _web("viewer")
    assert url not in viewer.get(reverse("queues:queue", args=["rn-rights"]) + "?tab=delayed").content.decode()
    assert url not in viewer.get(reverse("queues:task", args=[later])).content.decode()
    assert viewer.post(url, **JSON).status_code == 403
    assert viewer.post(url).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("csrf-less", perms=["view_dashboard", "retry_task"]))
    assert strict.post(url).status_code == 403
    assert readmodel.task(client, later).state == "delayed" and not AuditLog.objects.exists()


def test_a_single_delete_asks_first(client):
    """Delete without confirm=yes: a page asking (with CSRF), the task kept; JSON is told to confirm; then it goes."""
    (failed,) = failed_tasks(client, "del-ask", 1)
    web = _web("deleter", "delete_task")
    url = reverse("queues:task-delete", args=[failed])
    page = web.post(url, {"next": "/queues/q/del-ask/"})
    html = page.content.decode()
    assert page.status_code == 200 and "cannot be undone" in html
    assert 'name="csrfmiddlewaretoken"' in html and 'name="confirm" value="yes"' in html
    assert readmodel.task(client, failed) is not None and not AuditLog.objects.exists()
    told = web.post(url, **JSON)
    assert told.status_code == 400 and "confirm=yes" in told.json()["message"]
    assert readmodel.task(client, failed) is not None
    done = web.post(url, {"confirm": "yes", "next": "/queues/q/del-ask/"})
    assert done.status_code == 302 and readmodel.task(client, failed) is None
    assert AuditLog.objects.get().action == "delete"
    viewer = _web("viewer2")
    assert viewer.post(url, {"confirm": "yes"}).status_code == 403  # the right first, the question after


def test_run_now_through_the_api(client):
    """POST /api/tasks/<id>/run-now: retry_task's right (403 without), 409 once not delayed, audited by token."""
    from tests.support.api import Api, make_token

    q = Queue("rn-api")
    later = q.enqueue("later", delay=3600)
    path = f"/api/tasks/{later}/run-now"
    viewer = Api(make_token("view_dashboard", name="viewer"))
    assert viewer.post(path).status_code == 403
    assert readmodel.task(client, later).state == "delayed"
    api = Api(make_token("view_dashboard", "retry_task", name="runner"))
    r = api.post(path)
    assert r.status_code == 200 and r.json() == {"id": later, "queue": "rn-api", "state": "pending"}
    assert readmodel.task(client, later).state == "pending"
    assert api.post(path).status_code == 409
    assert api.post("/api/tasks/rn-api-0123456789abcdef/run-now").status_code == 404
    entry = AuditLog.objects.get()
    assert (entry.action, entry.token.name, entry.task_id) == ("run_now", "runner", later)


def test_run_now_through_the_api_tells_a_token_without_view_rights_no_task_state(client):
    """Without view_dashboard, run-now answers a pending, a failed, a running-gone and an unknown task alike (404)."""
    # Only a delayed task, which it may run now, gets another answer (main: 409 for a task that exists, 404 else).
    from tests.support.api import Api, make_token

    ids = {
        "pending": Queue("rn-state").enqueue("p"),
        "failed": failed_tasks(client, "rn-state", 1)[0],
        "unknown": "rn-state-0123456789abcdef",
    }
    api = Api(make_token("retry_task", name="blind"))
    answers = {
        (r.status_code, r.content.decode().replace(tid, "<id>"))
        for tid in ids.values()
        for r in [api.post(f"/api/tasks/{tid}/run-now")]
    }
    (answer,) = answers  # one answer for every task it may not run now
    assert answer[0] == 404 and "not delayed" in answer[1], answer
    later = Queue("rn-state").enqueue("later", delay=3600)
    assert api.post(f"/api/tasks/{later}/run-now").status_code == 200
    assert not AuditLog.objects.exclude(task_id=later).exists()  # nothing recorded for the refused ones
