"""POST/PATCH/DELETE /api/schedules/<name>: queues.change_schedule (manage_schedules is not
enough), an audit row each, bad settings 400 naming the key, a callback outside the allow-list
refused."""

import os

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


def test_numbers_past_a_floats_range_are_400s_naming_the_key(db):
    """An integer of 400 digits for every, retries, timeout or backoff: 400 naming it, through the API and the form ..."""
    # ... (main: math.isfinite raised OverflowError, a 500); nothing is made. Python's enqueue raises InvalidTask.
    import pytest
    from django.test import Client
    from django.urls import reverse

    from queues import Queue
    from queues.engine.errors import InvalidTask
    from tests.support.dashboard import make_user

    api = Api(make_token("change_schedule"))
    web = Client()
    web.force_login(make_user("scheduler", perms=("view_dashboard", "change_schedule")))
    huge = 10**400
    for key in ("every", "retries", "timeout", "backoff"):
        body = {"queue": "huge", "every": 5, key: huge}
        r = api.post(f"/api/schedules/api-{key}", body)
        assert r.status_code == 400 and r.json()["field"] == key, (key, r.content[:300])
        form = {"name": f"form-{key}", "queue": "huge", "every": "5", key: str(huge)}
        r = web.post(reverse("queues:schedule-create"), form, HTTP_ACCEPT="application/json")
        assert r.status_code == 400 and key in r.json()["message"], (key, r.content[:300])
    assert schedules.all(connection.get_default().client) == []
    for key in ("retries", "timeout", "backoff", "delay", "expires"):
        with pytest.raises(InvalidTask, match=key):
            Queue("huge").enqueue("x", **{key: huge})


def test_a_schedule_cannot_make_a_queue_beyond_max_queues_on_any_path(db):
    """At MAX_QUEUES, a schedule into a new queue is refused naming 'queue' (API, page, Python); existing queues are fine."""
    import pytest
    from django.test import Client
    from django.urls import reverse

    from queues import Queue
    from queues import schedules as python_api
    from queues.conf import build_config
    from queues.engine import keys
    from queues.engine.errors import InvalidSchedule
    from tests.test_dashboard_views import make_user

    url = os.environ["WORQR_REDIS_URL"]
    client = connection.configure(build_config().with_(max_queues=2), url).client
    try:
        Queue("full-a").enqueue("x")
        Queue("full-b").enqueue("x")
        api = Api(make_token("view_dashboard", "change_schedule"))
        r = api.post("/api/schedules/new-q", {"queue": "brand-new", "every": 60})
        assert r.status_code == 400 and r.json()["field"] == "queue" and "MAX_QUEUES" in r.json()["error"]
        assert api.post("/api/schedules/old-q", {"queue": "full-a", "every": 60}).status_code == 201
        r = api.call("PATCH", "/api/schedules/old-q", {"queue": "brand-new"})
        assert r.status_code == 400 and r.json()["field"] == "queue"
        web = Client()
        web.force_login(make_user("e", perms=["view_dashboard", "change_schedule"]))
        r = web.post(
            reverse("queues:schedule-create"),
            {"name": "form-q", "queue": "brand-new", "every": "5"},
            HTTP_ACCEPT="application/json",
        )
        assert r.status_code == 400 and "MAX_QUEUES" in r.json()["message"]
        big = "x" * (connection.get_default().config.max_payload_bytes + 1)
        r = web.post(
            reverse("queues:schedule-create"),
            {"name": "form-big", "queue": "full-a", "every": "5", "payload": big},
            HTTP_ACCEPT="application/json",
        )
        assert r.status_code == 400 and "payload" in r.json()["message"]  # the form checks the size as the API does
        with pytest.raises(InvalidSchedule, match="MAX_QUEUES"):
            python_api.create("py-q", queue="brand-new", every=60)
        assert client.hkeys(keys.LIVE_SCHEDULES) == [b"old-q"]
        assert schedules.get(client, "old-q").queue == "full-a"
        assert not client.sismember(keys.KNOWN_QUEUES, "brand-new")
    finally:
        connection.configure(build_config(), url)


def test_at_most_max_live_schedules_are_made_at_run_time(client, monkeypatch):
    """With MAX_LIVE schedules made, the next create is refused and nothing is written; a delete makes room."""
    import pytest

    from queues.engine import keys, live_schedules
    from queues.engine.errors import InvalidSchedule

    monkeypatch.setattr(live_schedules, "MAX_LIVE", 3)
    for i in range(3):
        live_schedules.create(client, f"s{i}", queue="cap", every=60)
    with pytest.raises(InvalidSchedule, match="3 schedules made at run time exist already"):
        live_schedules.create(client, "s3", queue="cap", every=60)
    assert client.hlen(keys.LIVE_SCHEDULES) == 3 and schedules.get(client, "s3") is None
    live_schedules.delete(client, "s0")
    live_schedules.create(client, "s3", queue="cap", every=60)
    assert schedules.get(client, "s3").queue == "cap"
