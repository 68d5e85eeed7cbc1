"""The HTTP API: every endpoint with good and bad input, with and without a token, with and
without the permission, against the real Redis of the test session."""

import pytest
from django.test import Client

from queues import Queue
from queues.engine import connection, keys
from queues.models import ACTION_PERMISSIONS, ApiToken, AuditLog
from tests.conftest import wait_registered
from tests.engine_calls import fail, take
from tests.support.api import Api, error, make_token

pytestmark = pytest.mark.django_db


# -- helpers (imported by the other test_api* files) ---------------------------------------


@pytest.fixture
def api():
    return Api(make_token("all", name="admin"))


def failed_task(queue="failing", payload="x"):
    """A task in the failed set, made with the engine's own scripts (no worker needed)."""
    q = Queue(queue)
    q.enqueue(payload, retries=0)
    client = connection.get_default().client
    (task,) = take(client, queue)
    fail(client, task)
    return task.id


# -- authentication and permissions -------------------------------------------------------

ROUTES = [
    ("POST", "/api/tasks", "enqueue_task"),
    ("GET", "/api/tasks/t1-0123456789abcdef", "view_dashboard"),
    ("DELETE", "/api/tasks/t1-0123456789abcdef", None),
    ("GET", "/api/queues", "view_dashboard"),
    ("GET", "/api/queues/t1", "view_dashboard"),
    ("POST", "/api/queues/t1/pause", "pause_queue"),
    ("POST", "/api/queues/t1/resume", "pause_queue"),
    ("POST", "/api/create", "enqueue_task"),
    ("POST", "/api/query", "view_dashboard"),
    ("POST", "/api/delete", None),
]


@pytest.mark.parametrize("method,path,perm", ROUTES)
def test_every_endpoint_refuses_a_missing_or_bad_token(method, path, perm):
    """No header, another scheme, an unknown token and a revoked one all get 401 with a WWW-Authenticate header, ..."""
    # ... before the body is even looked at.
    raw = make_token("all", name="revoked")
    ApiToken.objects.filter(name="revoked").update(revoked=True)
    for headers in (
        {},
        {"Authorization": "Basic dXNlcjpwdw=="},
        {"Authorization": "Bearer nope"},
        {"Authorization": f"Bearer {raw}"},
        {"Authorization": "Bearer "},
    ):
        r = Api().call(method, path, {"queue": "t1", "payload": "x"}, headers=headers)
        error(r, 401)
        assert r["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("method,path,perm", [r for r in ROUTES if r[2]])
def test_every_endpoint_needs_its_permission(method, path, perm, client):
    """A token with every permission but the one the endpoint needs gets 403, and nothing changes."""
    Queue("t1").enqueue("seed")  # the queue exists, so only the permission is missing
    before = client.dbsize(), AuditLog.objects.count()
    others = [c for c in ACTION_PERMISSIONS if c != perm]
    r = Api(make_token(*others)).call(
        method,
        path,
        {"queue": "t1", "payload": "x", "id": "t1-0123456789abcdef"}
        if path in ("/api/tasks", "/api/create")
        else {"id": "t1-0123456789abcdef"}
        if path.startswith("/api/query")
        else None,
    )
    assert "queues." + perm in error(r, 403)
    assert (client.dbsize(), AuditLog.objects.count()) == before
    assert not Queue("t1").is_paused()


def test_delete_needs_cancel_task_for_live_tasks_and_delete_task_for_failed_ones():
    """DELETE follows the dashboard."""
    # cancelling needs cancel_task, deleting a failed task delete_task; each permission alone does not do the other.
    live, failed = Queue("t1").enqueue("live"), failed_task()
    only_delete, only_cancel = Api(make_token("delete_task")), Api(make_token("cancel_task"))
    assert "queues.cancel_task" in error(only_delete.delete(f"/api/tasks/{live}"), 403)
    assert "queues.delete_task" in error(only_cancel.delete(f"/api/tasks/{failed}"), 403)
    assert "queues.delete_task" in error(only_cancel.post("/api/delete", {"id": failed}), 403)
    assert Queue("t1").get(live) and Queue("failing").get(failed)
    assert only_cancel.delete(f"/api/tasks/{live}").json()["result"] == "cancelled"
    assert only_delete.delete(f"/api/tasks/{failed}").json()["result"] == "deleted"
    assert Queue("t1").get(live) is None and Queue("failing").get(failed) is None


def _answer(response, task_id):
    """A DELETE's answer with the task id taken out: (status, body)."""
    return response.status_code, response.content.decode().replace(task_id, "<id>")


def test_a_token_that_may_not_remove_a_task_learns_nothing_of_its_state():
    """DELETE /api/tasks/<id> and POST /api/delete check rights before looking the task up: without view_dashboard, ..."""
    # ... a pending, a delayed, a failed and an unknown task get one same answer unless the token may remove it;
    # nothing is removed, and a token with neither right is refused before its body is read.
    ids = {
        "pending": Queue("t1").enqueue("p"),
        "delayed": Queue("t1").enqueue("d", delay=600),
        "failed": failed_task(),
        "unknown": "t1-0123456789abcdef",
    }
    for perms, removable in (
        (("enqueue_task",), ()),
        (("enqueue_task", "cancel_task"), ("pending", "delayed")),
        (("enqueue_task", "delete_task"), ("failed",)),
    ):
        api = Api(make_token(*perms))
        answers = set()
        for state, tid in ids.items():
            if state in removable:
                continue
            answers.add(_answer(api.delete(f"/api/tasks/{tid}"), tid))
            answers.add(_answer(api.post("/api/delete", {"id": tid}), tid))
        (answer,) = answers  # one answer for every task this token may not remove
        assert answer[0] == 403, (perms, answer)
        assert all(Queue(keys.queue_from_task_id(t)).get(t) for s, t in ids.items() if s != "unknown")
    neither = Api(make_token("enqueue_task"))
    assert "queues.cancel_task" in error(neither.post("/api/delete", "not json"), 403)
    both = Api(make_token("cancel_task", "delete_task"))
    assert both.delete(f"/api/tasks/{ids['unknown']}").status_code == 404
    assert both.delete(f"/api/tasks/{ids['failed']}").json()["result"] == "deleted"


def test_last_used_is_recorded_and_sessions_give_no_access(django_user_model):
    """A staff session without a token is refused; using a token sets its last_used."""
    user = django_user_model.objects.create_superuser("boss", password="pw")
    browser = Client()
    browser.force_login(user)
    assert browser.get("/api/queues").status_code == 401
    raw = make_token("view_dashboard", name="reader")
    assert Api(raw).get("/api/queues").status_code == 200
    assert ApiToken.objects.get(name="reader").last_used is not None


# -- POST /api/tasks ------------------------------------------------------------------------


def test_create_task_with_every_field(api, client, hooks):
    """POST /api/tasks with every field stores each one on the task, delayed, with a Location header."""
    r = api.post(
        "/api/tasks",
        {
            "queue": "t1",
            "payload": '{"a": 1}',
            "delay": 30,
            "retries": 3,
            "timeout": 5,
            "backoff": 0.5,
            "callback": "http://127.0.0.1:9/hook",
        },
    )
    assert r.status_code == 201, r.content
    tid = r.json()["id"]
    assert r["Location"] == f"/api/tasks/{tid}" and tid.startswith("t1-")
    task = Queue("t1").get(tid)
    assert (task.payload, task.state, task.retries, task.timeout, task.backoff, task.callback) == (
        '{"a": 1}',
        "delayed",
        3,
        5.0,
        0.5,
        "http://127.0.0.1:9/hook",
    )
    assert client.zscore(keys.queue_key("t1", "delayed"), tid)
    log = AuditLog.objects.get()
    assert (log.action, log.queue, log.task_id, log.token.name) == ("enqueue", "t1", tid, "admin")


def test_each_route_has_one_spelling_per_field(api):
    """/api/create takes the seed's names (topic, content, retry), /api/tasks worqr's (queue, payload, retries)."""
    # the other route's name is refused, saying what to use.
    r = api.post("/api/create", {"topic": "order", "content": "hello", "retry": 2, "delay": 0})
    assert r.status_code == 200
    task = Queue("order").get(r.json()["id"])
    assert (task.queue, task.payload, task.retries, task.state) == ("order", "hello", 2, "pending")
    message = error(api.post("/api/tasks", {"topic": "order", "payload": "x"}), 400, "topic")
    assert 'unknown field "topic" (here it is "queue")' in message
    message = error(api.post("/api/create", {"topic": "order", "content": "x", "retries": 1}), 400, "retries")
    assert 'unknown field "retries" (here it is "retry")' in message
    assert Queue("order").counts()["pending"] == 1


def test_json_payloads_are_stored_as_sent_and_unicode_survives(api):
    """A payload comes back byte for byte, non-ASCII and NUL included."""
    r = api.post("/api/tasks", {"queue": "t1", "payload": "héllo ✓ 😀 \u0000"})
    got = api.get(f"/api/tasks/{r.json()['id']}").json()
    assert got["payload"] == "héllo ✓ 😀 \u0000"


BAD_BODIES = [
    ({"payload": "x"}, "queue", "required"),
    ({"queue": "t1"}, "payload", "required"),
    ({"queue": "t1", "payload": None}, "payload", "required"),
    ({"queue": "t1", "payload": "x", "colour": "red"}, "colour", "unknown"),
    ({"queue": "t1", "topic": "t2", "payload": "x"}, "topic", "unknown"),
    ({"queue": "t1", "payload": "x", "retry": 1, "retries": 2}, "retry", "unknown"),
    ({"queue": 5, "payload": "x"}, "queue", "string"),
    ({"queue": "bad:name", "payload": "x"}, "queue", "letters"),
    ({"queue": "", "payload": "x"}, "queue", "not a queue name"),
    ({"queue": "q" * 201, "payload": "x"}, "queue", "1 to 200"),
    ({"queue": "t1", "payload": {"a": 1}}, "payload", "string"),
    ({"queue": "t1", "payload": ["x"]}, "payload", "string"),
    ({"queue": "t1", "payload": "x", "delay": -1}, "delay", ">= 0"),
    ({"queue": "t1", "payload": "x", "delay": "15"}, "delay", "number"),
    ({"queue": "t1", "payload": "x", "delay": True}, "delay", "number"),
    ({"queue": "t1", "payload": "x", "delay": 1e12}, "delay", "at most"),
    ({"queue": "t1", "payload": "x", "retries": 1.5}, "retries", "integer"),
    ({"queue": "t1", "payload": "x", "retries": -1}, "retries", ">= 0"),
    ({"queue": "t1", "payload": "x", "retries": 10**30}, "retries", "at most"),
    ({"queue": "t1", "payload": "x", "timeout": 0}, "timeout", "> 0"),
    ({"queue": "t1", "payload": "x", "timeout": 10**400}, "timeout", "at most"),
    ({"queue": "t1", "payload": "x", "backoff": -0.5}, "backoff", ">= 0"),
    ({"queue": "t1", "payload": "x", "callback": "http://127.0.0.1/"}, "callback", "disabled"),
]


@pytest.mark.parametrize("body,field,words", BAD_BODIES)
def test_bad_create_bodies_are_400_naming_the_field_and_write_nothing(api, client, body, field, words):
    """Each bad create body is a 400 naming the field, and writes nothing to Redis or the audit log."""
    message = error(api.post("/api/tasks", body), 400, field)
    assert words in message and field in message
    assert client.dbsize() == 0 and AuditLog.objects.count() == 0


@pytest.mark.parametrize(
    "url,words",
    [
        ("http://evil.example.com/hook", "not in"),
        ("http://127.0.0.1.evil.com/", "not in"),
        ("http://evil.com#@127.0.0.1/", "not in"),
        ("ftp://127.0.0.1/hook", "http"),
        ("file:///etc/passwd", "http"),
        ("http://user:pw@127.0.0.1/", "credentials"),
        ("http://127.0.0.1:99999/", "valid URL"),
        ("http://[::1/", "valid URL"),
        ("http:///nohost", "no host"),
        ("http://127.0.0.1/ space", "ASCII"),
        ("http://bücher.example/", "ASCII"),
        ("", "1 to"),
        (42, "string"),
    ],
)
def test_callbacks_outside_the_allow_list_are_refused_at_creation(api, client, hooks, url, words):
    """A callback URL the allow-list does not allow is refused at creation; nothing is written."""
    assert words in error(api.post("/api/tasks", {"queue": "t1", "payload": "x", "callback": url}), 400, "callback")
    assert client.dbsize() == 0


def test_callback_hosts_match_like_allowed_hosts(api, settings):
    """Allow-list entries match host names like Django's ALLOWED_HOSTS (domains, IPv6, ports)."""
    settings.WORQR = {**settings.WORQR, "CALLBACK_ALLOWED_HOSTS": [".example.com", "[::1]"]}
    for url in ("https://example.com/h", "https://hooks.example.com:8443/h?x=1", "http://[::1]:8000/"):
        assert api.post("/api/tasks", {"queue": "t1", "payload": "x", "callback": url}).status_code == 201, url
    error(api.post("/api/tasks", {"queue": "t1", "payload": "x", "callback": "https://example.org/"}), 400, "callback")


@pytest.fixture
def small(conn):
    """The engine configured with MAX_PAYLOAD_BYTES = 1000 (body limit 6000 + 64 KiB)."""
    return connection.configure(conn.config.with_(max_payload_bytes=1000), conn.url)


def test_payload_too_large_is_400_and_a_hopeless_body_413(api, client, small):
    """A payload over MAX_PAYLOAD_BYTES (in bytes, not characters) is 400; a body too big to be valid is 413."""
    assert api.post("/api/tasks", {"queue": "t1", "payload": "x" * 1000}).status_code == 201
    assert "over the limit" in error(api.post("/api/tasks", {"queue": "t1", "payload": "é" * 501}), 400, "payload")
    error(api.post("/api/tasks", {"queue": "t1", "payload": "x" * 80000}), 413)
    assert Queue("t1").counts()["pending"] == 1


@pytest.mark.parametrize(
    "body,content_type,status",
    [
        ('{"queue": "t1", "payload": "x"}', "text/plain", 415),
        ("queue=t1&payload=x", "application/x-www-form-urlencoded", 415),
        ('{"queue": "t1", "payload": "x"}', "application/json; charset=latin-1", 415),
        ('{"queue": "t1", "payload": "x"', "application/json", 400),
        ("", "application/json", 415),  # no body at all: nothing says it is JSON
        ("  ", "application/json", 400),
        ('["t1", "x"]', "application/json", 400),
        ('{"queue": "t1", "payload": "x", "delay": NaN}', "application/json", 400),
        ('{"queue": "t1", "payload": "x", "delay": Infinity}', "application/json", 400),
        ('{"queue": "t1", "payload": "x", "delay": 1e999}', "application/json", 400),
        ('{"queue": "t1", "queue": "t2", "payload": "x"}', "application/json", 400),
        ('{"queue": "t1", "payload": "\\ud800"}', "application/json", 400),
        (b'{"queue": "t1", "payload": "\xff"}', "application/json", 400),
        ("[" * 100000 + "]" * 100000, "application/json", 400),
        ('{"queue": "t1", "payload": "x"}', "application/vnd.worqr+json", 201),
        ('\ufeff{"queue": "t1", "payload": "x"}', "application/json; charset=UTF-8", 201),
    ],
)
def test_bodies_that_are_not_a_json_object(api, body, content_type, status):
    """Bodies that are not one JSON object, or not JSON at all, get the documented status and an error."""
    r = api.post("/api/tasks", body, content_type=content_type)
    assert r.status_code == status, r.content
    if status >= 400:
        assert r.json()["error"]


def test_csrf_does_not_apply_to_token_requests(client):
    """Browsers never send bearer tokens by themselves, so the API is CSRF-exempt."""
    api = Api(make_token("enqueue_task"), enforce_csrf_checks=True)
    assert api.post("/api/tasks", {"queue": "t1", "payload": "x"}).status_code == 201


# -- GET / DELETE /api/tasks/<id> -----------------------------------------------------------


def test_get_task(api, hooks):
    """GET /api/tasks/<id> shows the task's fields and times."""
    tid = api.post(
        "/api/tasks", {"queue": "t1", "payload": "p", "retries": 2, "delay": 60, "callback": "http://localhost/x"}
    ).json()["id"]
    body = api.get(f"/api/tasks/{tid}").json()
    assert {k: body[k] for k in ("id", "queue", "payload", "state", "attempts", "retries", "callback", "error")} == {
        "id": tid,
        "queue": "t1",
        "payload": "p",
        "state": "delayed",
        "attempts": 0,
        "retries": 2,
        "callback": "http://localhost/x",
        "error": None,
    }
    assert body["created_at"] < body["due_at"]


def test_get_failed_task_shows_its_error(api):
    """A failed task's state, attempts and error are shown."""
    tid = failed_task()
    body = api.get(f"/api/tasks/{tid}").json()
    assert (body["state"], body["attempts"], body["error"]) == ("failed", 1, "E: boom")


@pytest.mark.parametrize("task_id", ["t1-0123456789abcdef", "nonsense", "bad:q-0123456789abcdef", "t1-XYZ"])
def test_unknown_tasks_are_404(api, task_id):
    """Unknown or malformed task ids are 404 to GET and DELETE."""
    error(api.get(f"/api/tasks/{task_id}"), 404)
    error(api.delete(f"/api/tasks/{task_id}"), 404)


def test_delete_cancels_pending_and_deletes_failed_with_audit(api, client):
    """DELETE cancels a pending task and deletes a failed one, each with an audit row; a second DELETE is 404."""
    pending, failed = Queue("t1").enqueue("a"), failed_task()
    assert api.delete(f"/api/tasks/{pending}").json() == {"id": pending, "queue": "t1", "result": "cancelled"}
    assert api.delete(f"/api/tasks/{failed}").json() == {"id": failed, "queue": "failing", "result": "deleted"}
    assert Queue("t1").counts()["pending"] == 0 and Queue("failing").counts()["failed"] == 0
    assert [(a.action, a.task_id) for a in AuditLog.objects.order_by("id")] == [("cancel", pending), ("delete", failed)]
    error(api.delete(f"/api/tasks/{pending}"), 404)
    assert AuditLog.objects.count() == 2


def test_delete_of_a_task_whose_state_changed_meanwhile_is_409(api, monkeypatch):
    """The task was read as failed but is running by the time it is deleted: 409, no audit row."""
    from queues.api import views
    from queues.engine.task import Task

    tid = Queue("t1").enqueue("x")
    take(connection.get_default().client, "t1")
    monkeypatch.setattr(views.readmodel, "task", lambda client, i: Task(id=i, queue="t1", state="failed"))
    assert "running" in error(api.delete(f"/api/tasks/{tid}"), 409)
    monkeypatch.undo()
    assert AuditLog.objects.count() == 0 and Queue("t1").get(tid).state == "active"


# -- queues ---------------------------------------------------------------------------------


def test_queues_list_and_detail_with_a_real_worker(api, client, workers):
    """The queue list and a queue's page show counts, paused state and the worker serving it."""
    Queue("t2").enqueue_many(["a", "b"], delay=60)
    Queue("t3").pause()
    Queue("t3").enqueue("c")
    workers(["t3"], name="api-worker")
    wait_registered(client, "api-worker")
    listed = {q["name"]: q for q in api.get("/api/queues").json()["queues"]}
    assert set(listed) == {"t2", "t3"}
    assert listed["t2"]["counts"]["delayed"] == 2 and listed["t2"]["paused"] is False
    assert listed["t3"]["paused"] is True and listed["t3"]["counts"]["pending"] == 1
    assert [w["name"] for w in listed["t3"]["workers"]] == ["api-worker"] and listed["t2"]["workers"] == []
    detail = api.get("/api/queues/t3").json()
    for q in (detail, listed["t3"]):
        q["workers"][0].pop("heartbeat_age")
    assert detail == listed["t3"]
    assert detail["workers"][0]["concurrency"] == 1 and detail["workers"][0]["pid"]


def test_unknown_and_invalid_queues(api):
    """An unknown queue is 404, a malformed name 400 naming the queue."""
    error(api.get("/api/queues/nosuch"), 404)
    error(api.post("/api/queues/nosuch/pause"), 404)
    error(api.get("/api/queues/bad{name"), 400, "queue")
    error(api.post("/api/queues/bad{name/resume"), 400, "queue")
    assert api.get("/api/queues").json() == {"queues": [], "next": None, "total": 0}


def test_pause_and_resume(api):
    """Pause and resume through the API change the queue's state, each with an audit row naming the token."""
    q = Queue("t1")
    q.enqueue("x")
    assert api.post("/api/queues/t1/pause").json() == {"name": "t1", "paused": True}
    assert q.is_paused() and api.get("/api/queues/t1").json()["paused"] is True
    assert api.post("/api/queues/t1/resume").json() == {"name": "t1", "paused": False}
    assert not q.is_paused()
    assert [a.action for a in AuditLog.objects.order_by("id")] == ["pause", "resume"]
    assert all(a.token.name == "admin" for a in AuditLog.objects.all())


# -- methods, routes and outages -----------------------------------------------------------


@pytest.mark.parametrize(
    "method,path,allow",
    [
        ("GET", "/api/tasks", "POST"),
        ("PUT", "/api/tasks/t1-0123456789abcdef", "DELETE, GET"),
        ("POST", "/api/queues", "GET"),
        ("DELETE", "/api/queues/t1", "GET"),
        ("GET", "/api/queues/t1/pause", "POST"),
        ("GET", "/api/create", "POST"),
        ("PATCH", "/api/query", "POST"),
        ("GET", "/api/delete", "POST"),
        ("POST", "/api/openapi.json", "GET"),
    ],
)
def test_other_methods_are_405_with_allow(api, method, path, allow):
    """Methods a route does not take are 405 with an Allow header."""
    r = api.call(method, path)
    error(r, 405)
    assert r["Allow"] == allow


def test_unknown_routes_are_json_404(api):
    """Unknown API routes answer a JSON 404, with or without a token."""
    error(api.get("/api/nope"), 404)
    error(Api().get("/api/tasks/a/b"), 404)


def test_redis_outage_is_503_not_500(api, redis_server):
    """With Redis down, reads and writes answer 503 and write no audit row."""
    redis_server.stop()
    try:
        assert "unavailable" in error(api.get("/api/queues"), 503)
        r = api.post("/api/tasks", {"queue": "t1", "payload": "x"})
        error(r, 503)
        body = r.json()  # nobody listened: the task was certainly not added
        assert (body["added"], body["unknown"], len(body["not_added"])) == ([], [], 1), body
        assert AuditLog.objects.count() == 0
    finally:
        redis_server.start()


def test_error_messages_show_names_as_given_and_no_python_internals(api):
    """Names in error messages are escaped once (by JSON, never also by Python's repr), and a 5,000-digit number ..."""
    # ... is refused naming its field, without Python's limit message.
    from urllib.parse import quote

    name = "a<b\"c'd\\e"
    assert name in error(api.post("/api/tasks", {"queue": name, "payload": "x"}), 400, "queue")
    assert name in error(api.get(f"/api/queues/{quote(name, safe='')}"), 400, "queue")
    assert name in error(api.get(f"/api/tasks/{quote(name, safe='')}"), 404)
    assert name in error(api.post("/api/tasks", {"queue": "t1", "payload": "x", name: 1}), 400, name)
    huge = "9" * 5000
    for field in ("delay", "retries", "timeout", "backoff"):
        body = '{"queue": "t1", "payload": "x", "' + field + '": ' + huge + "}"
        message = error(api.post("/api/tasks", body), 400, field)
        assert "at most" in message and "set_int_max_str_digits" not in message and huge[:50] not in message
    message = error(api.post("/api/tasks", '{"queue": ' + huge + ', "payload": "x"}'), 400, "queue")
    assert "string" in message and huge[:50] not in message
    message = error(api.post("/api/tasks", "[" * 100000 + "]" * 100000), 400)
    assert "recursion" not in message
