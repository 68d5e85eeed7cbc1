"""POST/PATCH/DELETE /api/schedules/<name>: queues.change_schedule (manage_schedules is not
enough), an audit row each, bad settings 400 naming the key, a callback outside the allow-list
refused."""

from queues.engine import connection, schedules
from queues.models import AuditLog
from tests.test_api import Api, make_token


def test_create_change_delete_with_rights_and_audit(db):
    """POST/PATCH/DELETE need change_schedule, check callbacks and time zones, and write one audit row each."""
    client = connection.get_default().client
    manager = Api(make_token("view_dashboard", "manage_schedules"))
    r = manager.post("/api/schedules/api-s", {"queue": "as", "every": 60})
    assert r.status_code == 403 and "change_schedule" in r.json()["error"]
    assert schedules.get(client, "api-s") is None
    api = Api(make_token("view_dashboard", "change_schedule"))
    r = api.post("/api/schedules/api-s", {"queue": "as", "every": 60, "payload": "p"})
    assert r.status_code == 201 and r.json()["every"] == 60 and r["Location"].endswith("/api/schedules/api-s")
    r = api.post("/api/schedules/api-t", {"queue": "as", "every": 60, "callback": "http://evil.example/x"})
    assert r.status_code == 400 and r.json()["field"] == "callback"
    r = api.call("PATCH", "/api/schedules/api-s", {"cron": "0 * * * *", "payload": None})
    assert r.status_code == 200 and (r.json()["cron"], r.json()["every"], r.json()["payload"]) == (
        "0 * * * *",
        None,
        "",
    )
    r = api.call("PATCH", "/api/schedules/api-s", {"timezone": "Mars/Olympus"})
    assert r.status_code == 400 and r.json()["field"] == "timezone"
    assert api.delete("/api/schedules/api-s").json() == {"name": "api-s", "deleted": True}
    assert schedules.get(client, "api-s") is None
    actions = list(AuditLog.objects.order_by("at").values_list("action", flat=True))
    assert actions == ["schedule_create", "schedule_update", "schedule_delete"]
