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


def test_the_list_is_paged_by_name_and_by_size(client, db):
    """GET /api/schedules pages by name (limit, after: next, total) and ends a page once it passes 1 MiB of JSON."""
    from queues.api.schedules import PAGE_BYTES
    from queues.engine import live_schedules
    from tests.support.api import error

    for i in range(5):
        live_schedules.create(client, f"s{i}", queue="pg", every=60, payload=f"p{i}")
    api = Api(make_token("view_dashboard"))
    body = api.get("/api/schedules?limit=2").json()
    assert [s["name"] for s in body["schedules"]] == ["s0", "s1"] and (body["next"], body["total"]) == ("s1", 5)
    assert body["schedules"][0] == api.get("/api/schedules/s0").json()  # each item as GET <name> has it
    names, after = [], None
    while True:
        body = api.get("/api/schedules?limit=2" + (f"&after={after}" if after else "")).json()
        names += [s["name"] for s in body["schedules"]]
        after = body["next"]
        if after is None:
            break
    assert names == ["s0", "s1", "s2", "s3", "s4"]
    assert [s["name"] for s in api.get("/api/schedules").json()["schedules"]] == names  # 100 by default
    for bad in ("0", "1001", "x", "-1", "2.5"):
        assert "1 to 1000" in error(api.get(f"/api/schedules?limit={bad}"), 400, "limit")
    assert "schedule name" in error(api.get("/api/schedules?after=bad{s"), 400, "after")
    quotes = '"' * 600_000  # twice as long in JSON
    for i in range(3):
        live_schedules.create(client, f"t{i}", queue="pg", every=60, payload=quotes)
    r = api.get("/api/schedules?after=s4")
    body = r.json()
    assert [s["name"] for s in body["schedules"]] == ["t0"] and body["next"] == "t0"  # over 1 MiB with one
    assert PAGE_BYTES <= len(r.content) < PAGE_BYTES + 300_000 and body["schedules"][0]["payload"] == quotes
    assert [s["name"] for s in api.get("/api/schedules?after=t1").json()["schedules"]] == ["t2"]


def test_a_body_key_that_is_no_setting_is_a_400_naming_it(db):
    """POST and PATCH with "config", "client", "name" or any other unknown key: a JSON 400 naming it, nothing changed."""
    from tests.support.api import error

    client = connection.get_default().client
    api = Api(make_token("view_dashboard", "change_schedule"))
    assert api.post("/api/schedules/kept", {"queue": "uk", "every": 60}).status_code == 201
    for key in ("config", "client", "name", "nope"):
        body = {"queue": "uk", "every": 60, key: 1}
        assert f'unknown field "{key}"' in error(api.post("/api/schedules/new-one", body), 400, key)
        assert f'unknown field "{key}"' in error(api.call("PATCH", "/api/schedules/kept", {key: 1}), 400, key)
    message = error(
        api.post("/api/schedules/new-one", {"queue": "uk", "every": 5, "config": 1, "client": 2}), 400, "config"
    )
    assert message.startswith('unknown fields "config", "client"; the fields are queue, cron, every')
    assert schedules.get(client, "new-one") is None and schedules.get(client, "kept").every == 60
    assert list(AuditLog.objects.values_list("action", flat=True)) == ["schedule_create"]


def test_a_change_only_token_reads_no_schedule_back_through_its_writes(db):
    """Without view_dashboard, POST answers {name, created} and PATCH (even an empty one) {name, updated}: no payload read back."""
    owner = Api(make_token("view_dashboard", "change_schedule"))
    assert owner.post("/api/schedules/nightly", {"queue": "q", "every": 60, "payload": "SECRET"}).status_code == 201
    writer = Api(make_token("change_schedule"))
    r = writer.call("PATCH", "/api/schedules/nightly", {})
    assert r.status_code == 200 and r.json() == {"name": "nightly", "updated": True}
    r = writer.post("/api/schedules/other", {"queue": "q", "every": 60})
    assert r.status_code == 201 and r.json() == {"name": "other", "created": True}
    assert owner.call("PATCH", "/api/schedules/nightly", {}).json()["payload"] == "SECRET"
