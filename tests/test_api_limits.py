"""GET/PUT /api/queues/<name>/limits: read, override, reset, permission, audit, bad input."""

import pytest

from queues import Queue
from queues.models import AuditLog
from tests.support.api import Api, make_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    return Api(make_token("all", name="admin"))


def test_get_and_put_limits_with_an_audit_row(api):
    """PUT overrides a queue's limits (GET's shape), null means none, reset goes back; each PUT is audited."""
    Queue("t1").enqueue("x")
    got = api.get("/api/queues/t1/limits").json()
    assert got["name"] == "t1" and got["concurrency"] is None and got["active"] == 0
    r = api.call("PUT", "/api/queues/t1/limits", {"concurrency": 4, "rate": "10/s"})
    assert r.status_code == 200, r.content
    assert r.json()["concurrency"] == 4 and r.json()["rate"] == [10, 1.0]
    again = api.call("PUT", "/api/queues/t1/limits", r.json())  # the same shape goes back unchanged
    assert again.status_code == 200 and again.json()["concurrency"] == 4
    assert api.call("PUT", "/api/queues/t1/limits", {"rate": None}).json()["rate"] is None
    back = api.call("PUT", "/api/queues/t1/limits", {"reset": True}).json()
    assert back["concurrency"] is None and back["overrides"] == {}
    rows = list(AuditLog.objects.order_by("id"))
    assert [a.action for a in rows] == ["set_limits"] * 4
    assert '"concurrency": 4' in rows[0].detail and rows[0].token.name == "admin"


def test_put_limits_needs_manage_limits(api):
    """A token without manage_limits reads the limits but can't change them."""
    Queue("t1").enqueue("x")
    viewer = Api(make_token("view_dashboard"))
    assert viewer.get("/api/queues/t1/limits").status_code == 200
    assert viewer.call("PUT", "/api/queues/t1/limits", {"concurrency": 2}).status_code == 403
    assert Queue("t1").limits()["concurrency"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": "2"}, "concurrency"),
        ({"rate": [5]}, "rate"),
        ({"rate": "5/d"}, "rate"),
        ({"rate": [5, 0]}, "rate"),
        ({"partition_rate": 3}, "partition_rate"),
        ({"rate": "²/m"}, "rate"),
        ({"rate": "１/s"}, "rate"),
        ({"partition_rate": "9" * 5000 + "/h"}, "partition_rate"),
        ({"rate": [1, 10**400]}, "rate"),  # an int past a float's range: OverflowError, 500 on main
        ({"partition_rate": [1, -(10**400)]}, "partition_rate"),
        ({"reset": "yes"}, "reset"),
        ({"speed": 1}, "speed"),
    ],
)
def test_bad_limits_bodies_name_the_field_and_change_nothing(api, body, field):
    """A bad PUT body is a 400 naming its field; nothing changes and nothing is audited."""
    Queue("t1").enqueue("x")
    r = api.call("PUT", "/api/queues/t1/limits", body)
    assert r.status_code == 400 and r.json()["field"] == field, r.content
    assert Queue("t1").limits()["overrides"] == {} and not AuditLog.objects.exists()
