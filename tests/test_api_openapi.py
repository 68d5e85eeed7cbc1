"""/api/openapi.json is kept true: every route of queues/api/urls.py is described with its
methods, and every status code documented for an operation is produced by a real request here
(and no request here produces an undocumented one)."""

import re

import pytest
from django.urls import URLPattern

from queues import Queue
from queues.api import openapi, urls
from queues.engine import connection, schedules
from queues.engine.schedule_settings import parse
from queues.engine.task import Task
from tests.support.api import Api, make_token

pytestmark = pytest.mark.django_db

UNKNOWN = "t1-0123456789abcdef"
NO_BATCH = "b-0123456789abcdef"
GOOD = {"queue": "t1", "payload": "x"}


def test_served_without_a_token_and_equal_to_the_description():
    """The OpenAPI description is served without a token and equals the one the code builds."""
    r = Api().get("/api/openapi.json")
    assert r.status_code == 200 and r.json() == openapi.describe()
    assert r.json()["openapi"].startswith("3.")


def _template(route):
    return "/api/" + re.sub(r"<(?:\w+:)?\w+>", "{}", route)


def test_every_route_and_method_is_described():
    """Every API route and method is in the description, and nothing else is."""
    routes = {}
    for p in urls.urlpatterns:
        if isinstance(p, URLPattern) and p.name:  # the unnamed catch-all only answers 404
            methods = getattr(p.callback, "api_methods", ["GET"])
            routes[_template(str(p.pattern))] = {m.lower() for m in methods}
    described = {re.sub(r"\{\w+\}", "{}", path): set(ops) for path, ops in openapi.describe()["paths"].items()}
    assert described == routes


class Ctx:
    def __init__(self, monkeypatch):
        self.admin, self.noperm, self.anon = Api(make_token("all")), Api(make_token()), Api()
        self.monkeypatch = monkeypatch
        self.tid = Queue("t1").enqueue("kept")
        self.bid = self.batch()
        schedules.sync(connection.get_default().client, [parse("sch", {"queue": "t1", "every": 3600})])

    def fresh(self):
        return Queue("t1").enqueue("fresh")

    def delayed(self):
        return Queue("t1").enqueue("later", delay=3600)

    def stale(self):
        """A running task the API will read as failed: its delete then conflicts (409)."""
        from queues.api import views
        from tests.engine_calls import take

        tid = Queue("t9").enqueue("x")
        take(connection.get_default().client, "t9")
        self.monkeypatch.setattr(views.readmodel, "task", lambda c, i: Task(id=i, queue="t9", state="failed"))
        return tid

    def batch(self, closed=False):
        from queues.engine import Batch

        b = Batch(description="api")
        if closed:
            b.close()
        return b.id

    def big(self):
        return {"queue": "t1", "payload": "x" * 80000}

    def beyond_max_queues(self, request):
        """``request`` while MAX_QUEUES is 1: a new queue is refused (409)."""
        conn = connection.get_default()
        connection.configure(conn.config.with_(max_queues=1), conn.url)
        try:
            return request()
        finally:
            connection.configure(conn.config, conn.url)


def specific(c):
    """(path, method, status) -> a request producing it (401, 403 and 503 are generic)."""
    a = c.admin
    return {
        ("/api/tasks", "post", 201): lambda: a.post("/api/tasks", GOOD),
        ("/api/tasks", "post", 400): lambda: a.post("/api/tasks", {"queue": "t1"}),
        ("/api/tasks", "post", 404): lambda: a.post("/api/tasks", {**GOOD, "after": [UNKNOWN]}),
        ("/api/tasks", "post", 409): lambda: c.beyond_max_queues(
            lambda: a.post("/api/tasks", {**GOOD, "queue": "new"})
        ),
        ("/api/batches", "post", 201): lambda: a.post("/api/batches", {"description": "d"}),
        ("/api/batches", "post", 400): lambda: a.post("/api/batches", {"on_success": ["t1", "x"]}),
        ("/api/batches", "post", 413): lambda: a.post("/api/batches", c.big()),
        ("/api/batches", "post", 415): lambda: a.post("/api/batches", "x", content_type="text/plain"),
        ("/api/batches/{batch_id}", "get", 200): lambda: a.get(f"/api/batches/{c.batch()}"),
        ("/api/batches/{batch_id}", "get", 400): lambda: a.get("/api/batches/nope"),
        ("/api/batches/{batch_id}", "get", 404): lambda: a.get(f"/api/batches/{NO_BATCH}"),
        ("/api/batches/{batch_id}", "delete", 200): lambda: a.delete(f"/api/batches/{c.batch()}"),
        ("/api/batches/{batch_id}", "delete", 400): lambda: a.delete("/api/batches/nope"),
        ("/api/batches/{batch_id}", "delete", 404): lambda: a.delete(f"/api/batches/{NO_BATCH}"),
        ("/api/batches/{batch_id}/tasks", "post", 201): lambda: a.post(
            f"/api/batches/{c.batch()}/tasks", {"queue": "t1", "payloads": ["a"]}
        ),
        ("/api/batches/{batch_id}/tasks", "post", 400): lambda: a.post(
            f"/api/batches/{c.batch()}/tasks", {"queue": "t1", "payloads": []}
        ),
        ("/api/batches/{batch_id}/tasks", "post", 404): lambda: a.post(
            f"/api/batches/{NO_BATCH}/tasks", {"queue": "t1", "payloads": ["a"]}
        ),
        ("/api/batches/{batch_id}/tasks", "post", 409): lambda: a.post(
            f"/api/batches/{c.batch(closed=True)}/tasks", {"queue": "t1", "payloads": ["a"]}
        ),
        ("/api/batches/{batch_id}/tasks", "post", 413): lambda: a.post(f"/api/batches/{c.batch()}/tasks", c.big()),
        ("/api/batches/{batch_id}/tasks", "post", 415): lambda: a.post(
            f"/api/batches/{c.batch()}/tasks", "x", content_type="text/plain"
        ),
        ("/api/batches/{batch_id}/close", "post", 200): lambda: a.post(f"/api/batches/{c.batch()}/close"),
        ("/api/batches/{batch_id}/close", "post", 400): lambda: a.post("/api/batches/nope/close"),
        ("/api/batches/{batch_id}/close", "post", 404): lambda: a.post(f"/api/batches/{NO_BATCH}/close"),
        ("/api/tasks", "post", 413): lambda: a.post("/api/tasks", c.big()),
        ("/api/tasks", "post", 415): lambda: a.post("/api/tasks", "queue=t1", content_type="text/plain"),
        ("/api/tasks/{id}", "get", 200): lambda: a.get(f"/api/tasks/{c.tid}"),
        ("/api/tasks/{id}", "get", 404): lambda: a.get(f"/api/tasks/{UNKNOWN}"),
        ("/api/tasks/{id}", "delete", 200): lambda: a.delete(f"/api/tasks/{c.fresh()}"),
        ("/api/tasks/{id}", "delete", 404): lambda: a.delete(f"/api/tasks/{UNKNOWN}"),
        ("/api/tasks/{id}", "delete", 409): lambda: a.delete(f"/api/tasks/{c.stale()}"),
        ("/api/tasks/{id}/run-now", "post", 200): lambda: a.post(f"/api/tasks/{c.delayed()}/run-now"),
        ("/api/tasks/{id}/run-now", "post", 404): lambda: a.post(f"/api/tasks/{UNKNOWN}/run-now"),
        ("/api/tasks/{id}/run-now", "post", 409): lambda: a.post(f"/api/tasks/{c.fresh()}/run-now"),
        ("/api/queues", "get", 200): lambda: a.get("/api/queues"),
        ("/api/queues", "get", 400): lambda: a.get("/api/queues?limit=0"),
        ("/api/queues/{name}", "get", 200): lambda: a.get("/api/queues/t1"),
        ("/api/queues/{name}", "get", 400): lambda: a.get("/api/queues/bad{q"),
        ("/api/queues/{name}", "get", 404): lambda: a.get("/api/queues/nosuch"),
        ("/api/queues/{name}/pause", "post", 200): lambda: a.post("/api/queues/t1/pause"),
        ("/api/queues/{name}/pause", "post", 400): lambda: a.post("/api/queues/bad{q/pause"),
        ("/api/queues/{name}/pause", "post", 404): lambda: a.post("/api/queues/nosuch/pause"),
        ("/api/queues/{name}/resume", "post", 200): lambda: a.post("/api/queues/t1/resume"),
        ("/api/queues/{name}/resume", "post", 400): lambda: a.post("/api/queues/bad{q/resume"),
        ("/api/queues/{name}/resume", "post", 404): lambda: a.post("/api/queues/nosuch/resume"),
        ("/api/queues/{name}/limits", "get", 200): lambda: a.get("/api/queues/t1/limits"),
        ("/api/queues/{name}/limits", "get", 400): lambda: a.get("/api/queues/bad{q/limits"),
        ("/api/queues/{name}/limits", "get", 404): lambda: a.get("/api/queues/nosuch/limits"),
        ("/api/queues/{name}/limits", "put", 200): lambda: a.call("PUT", "/api/queues/t1/limits", {"concurrency": 3}),
        ("/api/queues/{name}/limits", "put", 400): lambda: a.call("PUT", "/api/queues/t1/limits", {"rate": "x"}),
        ("/api/queues/{name}/limits", "put", 404): lambda: a.call("PUT", "/api/queues/nosuch/limits", {}),
        ("/api/queues/{name}/limits", "put", 413): lambda: a.call("PUT", "/api/queues/t1/limits", c.big()),
        ("/api/queues/{name}/limits", "put", 415): lambda: a.call(
            "PUT", "/api/queues/t1/limits", "x", content_type="text/plain"
        ),
        ("/api/schedules", "get", 200): lambda: a.get("/api/schedules"),
        ("/api/schedules", "get", 400): lambda: a.get("/api/schedules?limit=0"),
        ("/api/schedules/{name}", "get", 200): lambda: a.get("/api/schedules/sch"),
        ("/api/schedules/{name}", "get", 400): lambda: a.get("/api/schedules/bad{s"),
        ("/api/schedules/{name}", "get", 404): lambda: a.get("/api/schedules/nosuch"),
        **{
            (f"/api/schedules/{{name}}/{action}", "post", status): (
                lambda action=action, name=name: a.post(f"/api/schedules/{name}/{action}")
            )
            for action, ok in (("pause", 200), ("resume", 200), ("trigger", 201))
            for status, name in ((ok, "sch"), (400, "bad{s"), (404, "nosuch"))
        },
        ("/api/schedules/{name}", "post", 201): lambda: a.post("/api/schedules/live1", EVERY),
        ("/api/schedules/{name}", "post", 400): lambda: a.post("/api/schedules/live2", {"queue": "t1", "every": 0}),
        ("/api/schedules/{name}", "post", 409): lambda: a.post("/api/schedules/sch", EVERY),
        ("/api/schedules/{name}", "post", 413): lambda: a.post("/api/schedules/live3", c.big()),
        ("/api/schedules/{name}", "post", 415): lambda: a.post("/api/schedules/live3", "x", content_type="text/plain"),
        ("/api/schedules/{name}", "patch", 200): lambda: (
            a.post("/api/schedules/live4", EVERY),
            a.call("PATCH", "/api/schedules/live4", {"every": 120}),
        )[1],
        ("/api/schedules/{name}", "patch", 400): lambda: a.call("PATCH", "/api/schedules/bad{s", {"every": 5}),
        ("/api/schedules/{name}", "patch", 404): lambda: a.call("PATCH", "/api/schedules/nosuch", {"every": 5}),
        ("/api/schedules/{name}", "patch", 409): lambda: a.call("PATCH", "/api/schedules/sch", {"every": 5}),
        ("/api/schedules/{name}", "patch", 413): lambda: a.call("PATCH", "/api/schedules/sch", c.big()),
        ("/api/schedules/{name}", "patch", 415): lambda: a.call(
            "PATCH", "/api/schedules/sch", "x", content_type="text/plain"
        ),
        ("/api/schedules/{name}", "delete", 200): lambda: (
            a.post("/api/schedules/live5", EVERY),
            a.delete("/api/schedules/live5"),
        )[1],
        ("/api/schedules/{name}", "delete", 400): lambda: a.delete("/api/schedules/bad{s"),
        ("/api/schedules/{name}", "delete", 404): lambda: a.delete("/api/schedules/nosuch"),
        ("/api/schedules/{name}", "delete", 409): lambda: a.delete("/api/schedules/sch"),
        ("/api/create", "post", 200): lambda: a.post("/api/create", {"topic": "t1", "content": "x"}),
        ("/api/create", "post", 400): lambda: a.post("/api/create", {"topic": "t1", "content": 5}),
        ("/api/create", "post", 409): lambda: c.beyond_max_queues(
            lambda: a.post("/api/create", {"topic": "new", "content": "x"})
        ),
        ("/api/create", "post", 413): lambda: a.post("/api/create", c.big()),
        ("/api/create", "post", 415): lambda: a.post("/api/create", "x", content_type="text/plain"),
        ("/api/query", "post", 200): lambda: a.post("/api/query", {"id": c.tid}),
        ("/api/query", "post", 400): lambda: a.post("/api/query", {"id": 5}),
        ("/api/query", "post", 404): lambda: a.post("/api/query", {"id": UNKNOWN}),
        ("/api/query", "post", 413): lambda: a.post("/api/query", c.big()),
        ("/api/query", "post", 415): lambda: a.post("/api/query", "x", content_type="text/plain"),
        ("/api/delete", "post", 200): lambda: a.post("/api/delete", {"id": c.fresh()}),
        ("/api/delete", "post", 400): lambda: a.post("/api/delete", {"id": c.tid, "force": True}),
        ("/api/delete", "post", 404): lambda: a.post("/api/delete", {"id": UNKNOWN}),
        ("/api/delete", "post", 409): lambda: a.post("/api/delete", {"id": c.stale()}),
        ("/api/delete", "post", 413): lambda: a.post("/api/delete", c.big()),
        ("/api/delete", "post", 415): lambda: a.post("/api/delete", "x", content_type="text/plain"),
        ("/api/openapi.json", "get", 200): lambda: c.anon.get("/api/openapi.json"),
    }


#: A schedule made at run time through the API.
EVERY = {"queue": "t1", "every": 60}


def generic(api, path, method, c):
    """The operation called by ``api`` with a plausible body."""
    url = path.replace("{id}", c.tid).replace("{name}", "t1").replace("{batch_id}", c.bid)
    body = {
        "/api/tasks": GOOD,
        "/api/create": {"topic": "t1", "content": "x"},
        "/api/batches": {"description": "d"},
        "/api/batches/{batch_id}/tasks": {"queue": "t1", "payloads": ["a"]},
        "/api/schedules/{name}": EVERY,
    }.get(path, {"id": c.tid} if path in ("/api/query", "/api/delete") else None)
    return api.call(method.upper(), url, body)


def test_every_documented_status_is_produced_and_nothing_else(conn, monkeypatch, redis_server):
    """Every status documented for an operation is produced by a real request, and requests produce only ..."""
    # ... documented ones.
    connection.configure(conn.config.with_(max_payload_bytes=1000), conn.url)  # 413 at ~70 KB
    c = Ctx(monkeypatch)
    documented = {
        (path, method, int(code))
        for path, ops in openapi.describe()["paths"].items()
        for method, op in ops.items()
        for code in op["responses"]
    }
    cases = specific(c)
    for path, method, code in sorted(documented):
        if code in (401, 403, 503):
            continue
        assert (path, method, code) in cases, f"no request produces the documented {code} of {method} {path}"
        with monkeypatch.context() as m:
            c.monkeypatch = m
            r = cases[(path, method, code)]()
        assert r.status_code == code, (path, method, code, r.content)
    assert set(cases) <= documented, set(cases) - documented
    for path, method, code in sorted(documented):
        if code in (401, 403):
            r = generic(c.anon if code == 401 else c.noperm, path, method, c)
            assert r.status_code == code, (path, method, code, r.content)
    redis_server.stop()
    try:
        for path, method, code in sorted(documented):
            if code == 503:
                r = generic(c.admin, path, method, c)
                assert r.status_code == 503, (path, method, r.content)
    finally:
        redis_server.start()


def test_operations_without_a_documented_auth_status_are_only_the_public_description():
    """Every operation but the public description documents 401."""
    for path, ops in openapi.describe()["paths"].items():
        for method, op in ops.items():
            assert ("401" in op["responses"]) == (path != "/api/openapi.json"), (path, method)


def test_the_public_document_does_not_publish_the_callback_allow_list(settings):
    """/api/openapi.json (no token) says callbacks exist, never which hosts, ports or networks the allow-list holds."""
    internal = ["redis.internal.corp:6379", ".hooks.corp.example", "10.20.0.0/16", "172.31.4.5:8081", "[fd00::7]:8443"]
    settings.WORQR = {**settings.WORQR, "CALLBACK_ALLOWED_HOSTS": internal}
    text = Api().get("/api/openapi.json").content.decode()
    assert '"callback"' in text
    for secret in ("internal", "corp", "6379", r"10\\.20", "10.20", "172", "8081", "fd00", "8443"):
        assert secret not in text, secret
