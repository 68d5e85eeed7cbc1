"""Dashboard pages and actions: the permission matrix, every action's effect and audit row,
input checks (400/404/409, never 500) and what the pages show."""

import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from queues import Queue
from queues.dashboard.failures import group_failures, message_shape, split_error
from queues.models import AuditLog
from tests.conftest import records, wait_for
from tests.support.dashboard import ACTIONS, make_user


@pytest.fixture
def viewer(db, client):
    return make_user("viewer", perms=["view_dashboard"])


@pytest.fixture
def operator(db):
    return make_user("operator", perms=["view_dashboard", *ACTIONS])


@pytest.fixture
def web(client):
    """Django's test client (the ``client`` fixture of this project is the Redis client)."""
    from django.test import Client

    return Client()


def pages(task_id):
    return [
        reverse("queues:overview"),
        reverse("queues:workers"),
        reverse("queues:queue", args=["t1"]),
        reverse("queues:task", args=[task_id]),
    ]


def actions(task_id):
    return [reverse(f"queues:task-{a}", args=[task_id]) for a in ("cancel", "retry", "delete")] + [
        reverse(f"queues:queue-{a}", args=["t1"]) for a in ("pause", "resume", "purge", "retry-all")
    ]


def test_anonymous_is_sent_to_the_admin_login(db, web):
    """Anonymous users get a redirect to the admin's login, for pages and actions alike."""
    tid = Queue("t1").enqueue("x")
    for url in pages(tid):
        resp = web.get(url)
        assert resp.status_code == 302 and resp["Location"].startswith("/admin/login/?next="), url
    for url in actions(tid):
        resp = web.post(url)
        assert resp.status_code == 302 and resp["Location"].startswith("/admin/login/"), url
    assert Queue("t1").get(tid) is not None


def test_non_staff_and_staff_without_view_permission_get_403(db, web):
    """A user with the view permission but not staff, and staff without it, are refused."""
    tid = Queue("t1").enqueue("x")
    for user in (make_user("plain", staff=False, perms=["view_dashboard", *ACTIONS]), make_user("staffonly")):
        web.force_login(user)
        for url in pages(tid):
            assert web.get(url).status_code == 403, (user, url)
        for url in actions(tid):
            assert web.post(url, {"confirm": "t1"}).status_code == 403, (user, url)
    assert Queue("t1").get(tid) is not None and not Queue("t1").is_paused()


def test_viewer_sees_every_page_but_every_action_is_403(viewer, web):
    """A staff "viewer" (view_dashboard only) sees all pages, without action buttons, and every action answers ..."""
    # ... 403 and changes nothing.
    tid = Queue("t1").enqueue("x")
    web.force_login(viewer)
    for url in pages(tid):
        resp = web.get(url)
        assert resp.status_code == 200, url
        assert b'data-action="cancel"' not in resp.content
    for url in actions(tid):
        assert web.post(url, {"confirm": "t1"}).status_code == 403, url
    assert Queue("t1").get(tid) is not None and Queue("t1").counts()["pending"] == 1
    assert not AuditLog.objects.exists()


def test_superuser_sees_the_dashboard_and_the_admin_links_to_it(db, web):
    """Superusers need no explicit permission."""
    # the admin index links to the dashboard and the audit log is in the admin.
    web.force_login(User.objects.create_superuser("root", password="pw"))
    assert web.get(reverse("queues:overview")).status_code == 200
    index = web.get(reverse("admin:index")).content.decode()
    assert 'href="/queues/"' in index
    assert web.get(reverse("admin:queues_auditlog_changelist")).status_code == 200


def audit(action):
    return list(AuditLog.objects.filter(action=action).values_list("user__username", "queue", "task_id"))


@pytest.mark.parametrize("target", ["x", "²", "0", "queues:overview", "//evil.example/", "https://evil.example/q/"])
def test_an_action_whose_next_is_not_a_path_of_the_site_goes_back_to_its_page(operator, web, target):
    """A form's next that is a word, a URL name or another site's address: the action is done once and answers ..."""
    # ... with a redirect to its own page, never a 500 after the change (main: redirect() looked "x" up as a URL name).
    Queue("t1").enqueue("x")
    web.force_login(operator)
    web.raise_request_exception = False
    resp = web.post(reverse("queues:queue-pause", args=["t1"]), {"next": target})
    assert resp.status_code == 302 and resp["Location"] == "/queues/q/t1/", (resp.status_code, resp.get("Location"))
    assert Queue("t1").is_paused() and audit("pause") == [("operator", "t1", "")]


def test_operator_cancel_pause_resume_purge_each_write_an_audit_row(operator, web):
    """Cancel a pending task, pause, resume, purge (after typing the name)."""
    # each works and each writes an audit row naming the user, queue and task.
    q = Queue("t1")
    tid, *others = q.enqueue_many(["a", "b", "c"])
    web.force_login(operator)
    resp = web.post(reverse("queues:task-cancel", args=[tid]), {"next": "/queues/q/t1/"})
    assert resp.status_code == 302 and resp["Location"] == "/queues/q/t1/"
    assert q.get(tid) is None
    assert audit("cancel") == [("operator", "t1", tid)]

    assert web.post(reverse("queues:queue-pause", args=["t1"])).status_code == 302 and q.is_paused()
    assert web.post(reverse("queues:queue-resume", args=["t1"])).status_code == 302 and not q.is_paused()
    assert audit("pause") == [("operator", "t1", "")] and audit("resume") == [("operator", "t1", "")]

    resp = web.post(reverse("queues:queue-purge", args=["t1"]), {"confirm": "t2"})
    assert resp.status_code == 400 and b"type the queue" in resp.content
    assert q.counts()["pending"] == 2 and not audit("purge")
    resp = web.post(reverse("queues:queue-purge", args=["t1"]), {"confirm": "t1"}, HTTP_ACCEPT="application/json")
    assert resp.json() == {"ok": True, "message": "Queue t1: 2 pending tasks purged."}
    assert q.counts()["pending"] == 0
    assert audit("purge") == [("operator", "t1", "")]
    assert AuditLog.objects.get(action="purge").detail == "2 tasks"


def test_operator_retry_delete_and_retry_all_failed_tasks(operator, web, workers, client):
    """Failed tasks (made by a real worker) can be retried one by one, deleted, or all retried."""
    # cancelling a failed task is refused with 409; each success writes an audit row.
    q = Queue("t3")
    ids = q.enqueue_many(['{"fail": "always"}'] * 4, retries=0)
    w = workers(["t3"], name="views-worker")
    wait_for(lambda: q.counts()["failed"] == 4, timeout=30, message="4 failed tasks")
    web.force_login(operator)
    workers_page = web.get(reverse("queues:workers")).content.decode()
    assert 'data-worker="views-worker"' in workers_page and '<a href="/queues/q/t3/">t3</a>' in workers_page
    w.kill()
    assert web.post(reverse("queues:task-cancel", args=[ids[0]])).status_code == 409
    assert web.post(reverse("queues:task-retry", args=[ids[0]])).status_code == 302
    assert q.get(ids[0]).state == "pending"
    asked = web.post(reverse("queues:task-delete", args=[ids[1]]))  # a single Delete asks first
    assert asked.status_code == 200 and b'name="confirm"' in asked.content and q.get(ids[1]) is not None
    assert web.post(reverse("queues:task-delete", args=[ids[1]]), {"confirm": "yes"}).status_code == 302
    assert q.get(ids[1]) is None
    assert web.post(reverse("queues:task-retry", args=[ids[1]])).status_code == 404
    resp = web.post(reverse("queues:queue-retry-all", args=["t3"]), HTTP_ACCEPT="application/json")
    assert resp.json()["message"] == "Queue t3: 2 failed tasks queued again."
    assert q.counts()["failed"] == 0 and q.counts()["pending"] == 3
    assert audit("retry") == [("operator", "t3", ids[0])]
    assert audit("delete") == [("operator", "t3", ids[1])]
    assert audit("retry_all") == [("operator", "t3", "")]
    page = web.get(reverse("queues:queue", args=["t3"])).content.decode()
    assert "ValueError" in page and "asked to fail on attempt &lt;n&gt;" in page and "4×" in page


def test_bad_input_answers_400_or_404_never_500(operator, web):
    """Malformed queue names and task ids, unknown queues and tasks, bad pages and GETs on actions are refused ..."""
    # ... with a status and a message before anything reaches Redis.
    Queue("t1").enqueue("x")
    web.force_login(operator)
    cases = [
        ("get", "/queues/q/-bad/", 400),
        ("get", "/queues/q/nosuchqueue/", 404),
        ("get", "/queues/q/t1/?page=abc", 400),
        ("get", "/queues/q/t1/?page=0", 400),
        ("get", "/queues/task/nonsense/", 400),
        ("get", "/queues/task/t1-0123456789abcdef/", 404),
        ("get", "/queues/task/?id=", 400),
        ("get", "/queues/task/?id=%7Bbad%7D", 400),
        ("post", "/queues/task/nonsense/cancel/", 400),
        ("post", "/queues/task/t1-0123456789abcdef/cancel/", 404),
        ("post", "/queues/task/t1-0123456789ABCDEF/delete/", 400),
        ("post", "/queues/q/a%20b/pause/", 400),
        ("post", "/queues/q/nosuchqueue/purge/", 404),
        ("get", "/queues/q/t1/pause/", 405),
    ]
    for method, url, status in cases:
        resp = getattr(web, method)(url)
        assert resp.status_code == status, (method, url, resp.status_code)
    resp = web.post("/queues/task/nonsense/cancel/", HTTP_ACCEPT="application/json")
    assert resp.json()["ok"] is False and "not a task id" in resp.json()["message"]
    assert not AuditLog.objects.exists()


def test_lookup_pending_pages_and_task_page(viewer, web):
    """Look-up redirects to the task page."""
    # pending is paged; payloads are escaped and long ones truncated with a link to see all.
    q = Queue("t1")
    ids = q.enqueue_many([f"task {i}" for i in range(120)])
    evil = q.enqueue("<script>alert(1)</script>" + "x" * 5000)
    web.force_login(viewer)
    resp = web.get("/queues/task/", {"id": ids[5]})
    assert resp.status_code == 302 and resp["Location"] == f"/queues/task/{ids[5]}/"
    page3 = web.get("/queues/q/t1/?page=3").content.decode()
    assert "Page 3 of 3" in page3 and ids[100] in page3 and ids[99] not in page3 and evil in page3
    task_page = web.get(f"/queues/task/{evil}/").content.decode()
    assert "<script>alert(1)</script>" not in task_page and "&lt;script&gt;alert(1)&lt;/script&gt;" in task_page
    assert "Show all 5025 characters" in task_page and "x" * 5000 not in task_page
    assert "x" * 5000 in web.get(f"/queues/task/{evil}/?full=1").content.decode()


def test_failure_grouping_normalises_numbers_hex_and_quoted_strings():
    """Messages differing only in numbers, hex ids or quoted strings fall in one group, with its count and first ..."""
    # ... and last seen.
    assert split_error("ValueError: bad 3") == ("ValueError", "bad 3")
    assert split_error("TimeoutError") == ("TimeoutError", "")
    assert (
        message_shape("no user 'bob' at 0xdeadbeef after 3.5 s (id 9f86d081884c7d65)")
        == "no user '…' at <hex> after <n> s (id <hex>)"
    )
    entries = [
        {"error": "KeyError: 'a1'", "failed_at": 5},
        {"error": "ValueError: attempt 3", "failed_at": 4},
        {"error": 'KeyError: "zz"', "failed_at": 3},
        {"error": "ValueError: attempt 12", "failed_at": 2},
        {"error": "KeyError: 'b'", "failed_at": 1},
    ]
    groups = group_failures(entries)
    assert [(g["key"], g["count"], g["first_seen"], g["last_seen"]) for g in groups] == [
        ("KeyError: '…'", 3, 1, 5),
        ("ValueError: attempt <n>", 2, 2, 4),
    ]


def test_cancelling_a_running_task_is_audited_as_stopping(operator, web, workers, client):
    """Cancelling a task that a real worker is running says so, and the audit row records "stopping (it was ..."""
    # ... running)"; cancelling a pending task records no such detail.
    q = Queue("a1")
    running = q.enqueue('{"sleep": 30}')
    workers(["a1"], name="cancel-worker")
    wait_for(
        lambda: (t := q.get(running)) is not None and t.state == "active", timeout=30, message="the task to be running"
    )
    waiting = Queue("t1").enqueue("never runs")
    web.force_login(operator)
    resp = web.post(reverse("queues:task-cancel", args=[running]), HTTP_ACCEPT="application/json")
    assert resp.json() == {"ok": True, "message": f"Task {running} cancelled: stopping it (it was running)."}
    wait_for(
        lambda: any(r["id"] == running and r["outcome"] == "cancelled" for r in records(client, "a1")),
        timeout=20,
        message="the worker to stop the task",
    )
    assert web.post(reverse("queues:task-cancel", args=[waiting])).status_code == 302
    rows = {a.task_id: a.detail for a in AuditLog.objects.filter(action="cancel")}
    assert rows == {running: "stopping (it was running)", waiting: ""}


def test_refusals_answer_json_to_the_pages_script(viewer, web):
    """A request that accepts JSON (the page's script) gets refusals as JSON with a message."""
    # 401 when logged out, 403 without the permission, 405 for a GET on an action.
    tid = Queue("t1").enqueue("x")
    url = reverse("queues:task-cancel", args=[tid])
    for resp, status, words in [
        (web.post(url, HTTP_ACCEPT="application/json"), 401, "log in"),
        (web.get(reverse("queues:overview"), HTTP_ACCEPT="application/json"), 401, "log in"),
    ]:
        assert (resp.status_code, resp["Content-Type"]) == (status, "application/json"), resp.content
        assert resp.json()["ok"] is False and words in resp.json()["message"]
    web.force_login(viewer)
    resp = web.post(url, HTTP_ACCEPT="application/json")
    assert resp.status_code == 403 and "queues.cancel_task" in resp.json()["message"]
    resp = web.get(url, HTTP_ACCEPT="application/json")
    assert resp.status_code == 405 and resp.json()["ok"] is False and resp["Allow"] == "POST"
    web.force_login(make_user("plain", staff=False, perms=["view_dashboard"]))
    resp = web.get(reverse("queues:overview"), HTTP_ACCEPT="application/json")
    assert resp.status_code == 403 and "staff" in resp.json()["message"]
    assert Queue("t1").get(tid) is not None


def test_names_in_messages_are_escaped_once_and_huge_numbers_refused_plainly(operator, web):
    """A bad queue name or task id is shown as typed, escaped once by the page (HTML) or the JSON answer, never ..."""
    # ... also by Python's repr; a 5,000-digit page number is a plain 400.
    from urllib.parse import quote

    from django.utils.html import escape

    Queue("t1").enqueue("x")
    web.force_login(operator)
    name = "a<b\"c'd\\e"
    page = web.get(f"/queues/q/{quote(name, safe='')}/")
    assert page.status_code == 400 and escape(name) in page.content.decode()
    page = web.get("/queues/task/", {"id": name})
    assert page.status_code == 400 and escape(name) in page.content.decode()
    resp = web.post(f"/queues/q/{quote(name, safe='')}/pause/", HTTP_ACCEPT="application/json")
    assert resp.status_code == 400 and name in resp.json()["message"]
    resp = web.post(f"/queues/task/{quote(name, safe='')}/cancel/", HTTP_ACCEPT="application/json")
    assert resp.status_code == 400 and name in resp.json()["message"]
    page = web.get("/queues/q/t1/", {"page": "9" * 5000})
    note = re.search(r'<p class="errornote">(.*?)</p>', page.content.decode()).group(1)
    assert page.status_code == 400 and "page must be" in note
    assert "set_int_max_str_digits" not in note and "9" * 100 not in note
