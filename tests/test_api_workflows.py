"""The HTTP API's workflows: after= on create, batches (open, add, close, read, cancel)."""

import pytest

from queues.engine import Batch, Queue, keys, workflows
from tests.engine_calls import finish, take
from tests.support.api import Api, make_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    return Api(make_token("all", name="wf"))


def test_create_with_after_is_blocked_until_the_parent_completes(api, client):
    """POST /api/tasks with after: blocked, then pending once the parent completed."""
    parent = api.post("/api/tasks", {"queue": "t1", "payload": "p"}).json()["id"]
    r = api.post("/api/tasks", {"queue": "t2", "payload": "c", "after": [parent], "on_parent_failure": "run"})
    assert r.status_code == 201, r.content
    child = r.json()["id"]
    assert api.get(f"/api/tasks/{child}").json()["state"] == "blocked"
    (t,) = take(client, "t1")
    finish(client, t)
    workflows.drain(client, "t1")
    assert api.get(f"/api/tasks/{child}").json()["state"] == "pending"


def test_create_with_bad_after_writes_nothing(api, client):
    """Bad after values and modes (a boolean or number too): 400 naming the field, or 404 for an unknown parent; ..."""
    # ... nothing written.
    for body, status, field in (
        ({"after": "t1-0123456789abcdef"}, 400, "after"),
        ({"after": ["nope"]}, 400, "after"),
        ({"after": ["t1-0123456789abcdef"] * 1001}, 400, "after"),
        ({"after": [], "on_parent_failure": "maybe"}, 400, "on_parent_failure"),
        ({"after": [], "on_parent_failure": True}, 400, "on_parent_failure"),
        ({"on_parent_failure": False}, 400, "on_parent_failure"),
        ({"on_parent_failure": 1}, 400, "on_parent_failure"),
        ({"on_parent_failure": 0.5}, 400, "on_parent_failure"),
        ({"after": ["t1-0123456789abcdef"]}, 404, None),
    ):
        r = api.post("/api/tasks", {"queue": "t2", "payload": "c", **body})
        assert r.status_code == status, (body, r.content)
        if field:
            assert r.json()["field"] == field
    assert Queue("t2").counts()["enqueued"] == 0


def test_batch_lifecycle_over_http(api, client):
    """Open, add tasks, close, read, and the on_complete callback enqueued once the tasks ended."""
    r = api.post(
        "/api/batches",
        {"description": "nightly", "on_complete": {"queue": "t6", "payload": "done"}},
    )
    assert r.status_code == 201, r.content
    bid = r.json()["id"]
    r = api.post(f"/api/batches/{bid}/tasks", {"queue": "t1", "payloads": ["a", "b"], "retries": 0})
    assert r.status_code == 201 and len(r.json()["ids"]) == 2
    r = api.post(f"/api/batches/{bid}/close")
    assert r.status_code == 200 and r.json()["state"] == "running" and r.json()["total"] == 2
    assert api.post(f"/api/batches/{bid}/tasks", {"queue": "t1", "payloads": ["c"]}).status_code == 409
    for t in take(client, "t1", count=2):
        finish(client, t)
    workflows.drain_all(client, "t1")
    got = api.get(f"/api/batches/{bid}").json()
    assert (got["state"], got["completed"], got["description"]) == ("succeeded", 2, "nightly")
    assert Queue("t6").counts()["enqueued"] == 1


def test_deleting_a_batch_cancels_its_tasks(api, client):
    """DELETE /api/batches/<id> cancels the unfinished tasks and closes the batch."""
    b = Batch()
    b.enqueue_many("t1", ["a", "b", "c"])
    r = api.delete(f"/api/batches/{b.id}")
    assert r.status_code == 200 and r.json()["cancelled"] == 3
    info = Batch.get(b.id)
    assert info["cancelled"] == 3 and info["state"] == "finished_with_failures"


def test_malformed_batch_bodies_are_refused(api, client):
    """Malformed callbacks and payloads: 400 naming the field, no batch opened."""
    for body, field in (
        ({"on_success": ["t1", "x"]}, "on_success"),
        ({"on_complete": {"queue": "bad{q", "payload": "x"}}, "on_complete.queue"),
        ({"description": 5}, "description"),
    ):
        r = api.post("/api/batches", body)
        assert r.status_code == 400 and r.json()["field"] == field, r.content
    assert client.zcard("worqr:batches") == 0


def test_reading_a_child_cancelled_by_its_parent_says_why(api, client):
    """GET /api/tasks/<child> of a child cancelled by a failed parent: its record, with the reason and parent."""
    from tests.engine_calls import fail

    a = Queue("t1").enqueue("p", retries=0)
    b = Queue("t2").enqueue("c", after=[a])
    (t,) = take(client, "t1")
    fail(client, t)
    workflows.drain(client, "t1")
    r = api.get(f"/api/tasks/{b}")
    assert r.status_code == 200
    body = r.json()
    assert (body["state"], body["reason"], body["parents"]) == ("cancelled", f"parent {a} failed", [a])
    client.delete(keys.queue_key("t2", "history"))  # its record pruned: how it ended, from its links
    r = api.get(f"/api/tasks/{b}")
    assert r.status_code == 404
    assert r.json() == {
        "error": f"task {b} is gone: cancelled: parent {a} failed",
        "outcome": "cancelled",
        "reason": f"parent {a} failed",
        "parents": [a],
    }
    assert list(api.get("/api/tasks/t2-0123456789abcdef").json()) == ["error"]  # unknown: the error alone


def test_a_write_only_token_reads_nothing_through_a_batch_close_or_a_limits_put():
    """Without view_dashboard, close answers {id, closed} and PUT limits {name, updated}: no callbacks, no counts, no use."""
    b = Batch(on_success=("reports", "SECRET-CALLBACK"), description="quarterly")
    b.enqueue("t1", "row")
    writer = Api(make_token("enqueue_task", "manage_limits", name="writer"))
    r = writer.post(f"/api/batches/{b.id}/close")
    assert r.status_code == 200 and r.json() == {"id": b.id, "closed": True}
    assert Batch.get(b.id)["closed"]
    r = writer.call("PUT", "/api/queues/t1/limits", {})
    assert r.status_code == 200 and r.json() == {"name": "t1", "updated": False}
    r = writer.call("PUT", "/api/queues/t1/limits", {"concurrency": 3})
    assert r.status_code == 200 and r.json() == {"name": "t1", "updated": True}
    reader = Api(make_token("enqueue_task", "manage_limits", "view_dashboard", name="reader"))
    assert reader.post(f"/api/batches/{b.id}/close").json()["on_success"] == ["reports", "SECRET-CALLBACK"]
    assert reader.call("PUT", "/api/queues/t1/limits", {}).json()["concurrency"] == 3
