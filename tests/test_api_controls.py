"""POST /api/tasks with expires, throttle and debounce; a RateLimited hold in GET .../limits;
bad controls are 400 naming the field and write nothing."""

import time

import pytest

from queues import Queue
from queues.models import AuditLog
from tests.engine_calls import take
from tests.test_api import Api, error, make_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    return Api(make_token("all", name="admin"))


def test_throttle_over_http_returns_the_windows_first_id(api):
    """Two POSTs with the same throttle key: one task, both answers name it."""
    body = {"queue": "t1", "payload": "x", "throttle": {"key": "user-1", "seconds": 30}}
    first = api.post("/api/tasks", body)
    second = api.post("/api/tasks", dict(body, payload="y"))
    assert first.status_code == 201, first.content
    assert second.json()["id"] == first.json()["id"]
    assert Queue("t1").counts()["enqueued"] == 1


def test_debounce_over_http_replaces_the_payload(api):
    """Two POSTs with the same debounce key: one delayed task holding the second payload."""
    body = {"queue": "t1", "payload": "old", "debounce": {"key": "doc", "seconds": 30}}
    first = api.post("/api/tasks", body).json()["id"]
    assert api.post("/api/tasks", dict(body, payload="new")).json()["id"] == first
    task = api.get(f"/api/tasks/{first}").json()
    assert task["payload"] == "new" and task["state"] == "delayed"


def test_expires_over_http(api, client):
    """expires=0.2 into a paused queue: resumed later, the task is counted expired."""
    q = Queue("t1")
    q.pause()
    api.post("/api/tasks", {"queue": "t1", "payload": "x", "expires": 0.2})
    time.sleep(0.4)
    q.resume()
    assert take(client, "t1") == []
    assert q.counts()["expired"] == 1


def test_a_hold_shows_in_the_limits(api, client):
    """A queue held by a RateLimited shows held_until; a PUT of the same shape goes back unchanged."""
    from tests.test_controls import _limited

    Queue("t1").enqueue("x")
    (task,) = take(client, "t1")
    _limited(client, task, 30, "q")
    got = api.get("/api/queues/t1/limits").json()
    assert got["held_until"] is not None and got["held_partitions"] == {}
    assert api.call("PUT", "/api/queues/t1/limits", got).status_code == 200
    assert api.call("PUT", "/api/queues/t1/limits", {"reset": True}).json()["held_until"] is None


@pytest.mark.parametrize(
    "extra, field, words",
    [
        ({"expires": 0}, "expires", "> 0"),
        ({"expires": "soon"}, "expires", "number"),
        ({"expires": 10**9}, "expires", "at most"),
        ({"throttle": "k"}, "throttle", "object"),
        ({"throttle": {"key": "k"}}, "throttle", "object"),
        ({"throttle": {"key": "", "seconds": 1}}, "throttle.key", "1 to"),
        ({"throttle": {"key": 5, "seconds": 1}}, "throttle.key", "string"),
        ({"debounce": {"key": "k", "seconds": 0}}, "debounce.seconds", "> 0"),
        ({"debounce": {"key": "k", "seconds": 1}, "delay": 5}, "debounce", "with delay"),
        ({"debounce": {"key": "k", "seconds": 1}, "throttle": {"key": "k", "seconds": 1}}, "debounce", "with throttle"),
    ],
)
def test_bad_controls_are_400_naming_the_field_and_write_nothing(api, client, extra, field, words):
    """Each bad control is a 400 naming its field; nothing reaches Redis or the audit log."""
    message = error(api.post("/api/tasks", {"queue": "t1", "payload": "x", **extra}), 400, field)
    assert words in message
    assert client.dbsize() == 0 and AuditLog.objects.count() == 0
