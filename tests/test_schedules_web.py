"""Schedules from Django: the system check, ``manage.py schedules``, the dashboard's Schedules page
and actions (permission, audit log), the HTTP API and the metrics."""

import json
from io import StringIO

import pytest
from django.core import checks
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from queues import Queue, schedules
from queues.engine import schedules as engine_schedules
from queues.engine.schedule_settings import parse
from queues.models import AuditLog
from tests.support.api import Api, make_token
from tests.support.dashboard import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def declared(client):
    """Two schedules in Redis, as a worker's sync leaves them."""
    engine_schedules.sync(
        client,
        [
            parse("nightly", {"queue": "reports", "cron": "0 3 * * *", "timezone": "Europe/Paris", "payload": "all"}),
            parse("ping", {"queue": "t1", "every": 10, "payload": "ping", "missed": "once"}),
        ],
    )


@pytest.mark.parametrize(
    "entry, code, field",
    [
        ({"queue": "q", "cron": "0 25 * * *"}, "queues.E021", "'cron'"),
        ({"queue": "q", "cron": "0 3 * * *", "every": 5}, "queues.E021", "exactly one"),
        ({"queue": "q", "every": 0}, "queues.E021", "'every'"),
        ({"queue": "q", "every": 5, "timezone": "Nowhere/Land"}, "queues.E022", "'timezone'"),
        ({"queue": "no way", "every": 5}, "queues.E023", "'queue'"),
        ({"queue": "q", "every": 5, "missed": "all"}, "queues.E024", "'missed'"),
        ({"queue": "q", "every": 5, "retries": -2}, "queues.E025", "'retries'"),
        ({"queue": "q", "every": 5, "callback": "https://evil.example.com/"}, "queues.E025", "'callback'"),
        # the queue's handler gives no lock ("") or no partition ("") for this payload
        ({"queue": "bylock", "every": 5}, "queues.E025", "'lock'"),
        ({"queue": "lim-fair", "every": 5, "payload": '{"c": ""}'}, "queues.E025", "'partition'"),
        ({"queue": "q", "every": 5, "when": "often"}, "queues.E026", "'when'"),
    ],
)
def test_the_system_check_names_the_schedule_and_the_field(entry, code, field):
    """Each bad entry is one queues.E0xx error naming the schedule and the key."""
    with override_settings(WORQR={"SCHEDULES": {"job": entry, "fine": {"queue": "q", "every": 5}}}):
        errors = [e for e in checks.run_checks() if e.id.startswith("queues.E")]
    assert [e.id for e in errors] == [code]
    assert "'job'" in errors[0].msg and field in errors[0].msg


def test_a_bad_name_and_good_settings():
    """A bad schedule name is queues.E020; valid SCHEDULES give no error at all."""
    with override_settings(WORQR={"SCHEDULES": {"a b": {"queue": "q", "every": 5}}}):
        assert [e.id for e in checks.run_checks() if e.id.startswith("queues.")] == ["queues.E020"]
    with override_settings(WORQR={"SCHEDULES": {"ok": {"queue": "q", "cron": "@daily", "timezone": "Asia/Tokyo"}}}):
        assert [e for e in checks.run_checks() if e.id.startswith("queues.")] == []


def test_the_schedules_command(declared):
    """Lists the schedules (text and JSON); trigger prints the id; unknown names are a CommandError."""
    out = StringIO()
    call_command("schedules", stdout=out)
    assert "nightly" in out.getvalue() and "0 3 * * * Europe/Paris" in out.getvalue()
    assert "every 10 s" in out.getvalue() and "2 schedule(s)" in out.getvalue()
    out = StringIO()
    call_command("schedules", "--json", stdout=out)
    listed = json.loads(out.getvalue())["schedules"]
    assert [s["name"] for s in listed] == ["nightly", "ping"] and listed[1]["missed"] == "once"
    out = StringIO()
    call_command("schedules", "trigger", "ping", stdout=out)
    assert Queue("t1").get(out.getvalue().strip()).payload == "ping"
    call_command("schedules", "pause", "ping", stdout=StringIO())
    assert schedules.get("ping").paused
    call_command("schedules", "resume", "ping", stdout=StringIO())
    assert not schedules.get("ping").paused
    with pytest.raises(CommandError, match="no schedule 'nope'"):
        call_command("schedules", "pause", "nope")
    with pytest.raises(CommandError, match="needs the name"):
        call_command("schedules", "trigger")


def test_the_schedules_page_and_its_actions(declared):
    """The page shows each schedule in words with its next run."""
    # pause/resume/trigger need manage_schedules, each writes an audit row; an unknown schedule is 404.
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    page = web.get(reverse("queues:schedules"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "At 03:00 (Europe/Paris time)" in html and "Every 10 seconds" in html and "data-until=" in html
    assert 'data-section="schedules"' in html  # kept live by the socket, rendered by the same template
    assert 'data-action="trigger now"' not in html  # no permission, no buttons
    assert web.post(reverse("queues:schedule-trigger", args=["ping"])).status_code == 403
    web.force_login(make_user("ops", perms=["view_dashboard", "manage_schedules"]))
    assert 'data-action="trigger now"' in web.get(reverse("queues:schedules")).content.decode()
    r = web.post(reverse("queues:schedule-trigger", args=["ping"]), HTTP_ACCEPT="application/json")
    assert r.status_code == 200 and r.json()["ok"]
    task_id = schedules.get("ping").last_task_id
    assert task_id in r.json()["message"] and Queue("t1").get(task_id) is not None
    r = web.post(reverse("queues:schedule-pause", args=["ping"]), {"next": reverse("queues:schedules")})
    assert r.status_code == 302 and schedules.get("ping").paused
    web.post(reverse("queues:schedule-resume", args=["ping"]))
    assert not schedules.get("ping").paused
    rows = list(AuditLog.objects.order_by("at").values_list("action", "queue", "task_id", "detail"))
    assert rows == [
        ("schedule_trigger", "t1", task_id, "schedule ping"),
        ("schedule_pause", "t1", "", "schedule ping"),
        ("schedule_resume", "t1", "", "schedule ping"),
    ]
    assert web.post(reverse("queues:schedule-pause", args=["nope"])).status_code == 404
    assert web.get(reverse("queues:schedule-pause", args=["ping"])).status_code == 405


def test_the_schedules_page_shows_every_schedules_time_zone_utc_included(client):
    """Each schedule's timing in words names its time zone, UTC too; intervals tick in UTC."""
    engine_schedules.sync(
        client,
        [
            parse("utc", {"queue": "q", "cron": "0 3 * * *"}),
            parse("tokyo", {"queue": "q", "cron": "0 3 * * *", "timezone": "Asia/Tokyo"}),
            parse("often", {"queue": "q", "every": 10, "timezone": "Asia/Tokyo"}),  # ignored by intervals
        ],
    )
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    html = web.get(reverse("queues:schedules")).content.decode()
    rows = {name: html.split(f'data-schedule="{name}"')[1].split("</tr>")[0] for name in ("utc", "tokyo", "often")}
    assert "At 03:00 (UTC time)" in rows["utc"] and "At 03:00 (Asia/Tokyo time)" in rows["tokyo"]
    assert "Every 10 seconds (UTC)" in rows["often"]


def test_the_overview_links_to_the_schedules_page():
    """The overview page has a link to the Schedules page."""
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    page = web.get(reverse("queues:overview"))
    assert page.status_code == 200
    assert f'href="{reverse("queues:schedules")}"' in page.content.decode()


def test_the_api(declared):
    """GET lists and reads; POST pause/resume/trigger need manage_schedules, are audited; 404/400."""
    viewer, admin = Api(make_token("view_dashboard")), Api(make_token("all"))
    listed = viewer.get("/api/schedules").json()["schedules"]
    assert [s["name"] for s in listed] == ["nightly", "ping"]
    one = viewer.get("/api/schedules/nightly").json()
    assert (one["cron"], one["timezone"], one["paused"], one["next_run"][-6:]) == (
        "0 3 * * *",
        "Europe/Paris",
        False,
        "+00:00",
    )
    assert viewer.post("/api/schedules/ping/pause").status_code == 403
    assert admin.post("/api/schedules/ping/pause").json() == {"name": "ping", "paused": True}
    assert viewer.get("/api/schedules/ping").json()["paused"] is True
    assert admin.post("/api/schedules/ping/resume").json() == {"name": "ping", "paused": False}
    r = admin.post("/api/schedules/ping/trigger")
    assert r.status_code == 201 and r["Location"] == f"/api/tasks/{r.json()['id']}"
    assert admin.get(r["Location"]).json()["payload"] == "ping"
    assert [a.action for a in AuditLog.objects.order_by("at")] == [
        "schedule_pause",
        "schedule_resume",
        "schedule_trigger",
    ]
    assert admin.get("/api/schedules/nope").status_code == 404
    assert admin.post("/api/schedules/nope/trigger").status_code == 404
    assert admin.get("/api/schedules/bad{name").json()["field"] == "name"


def test_metrics_per_schedule(declared, client):
    """Runs enqueued per schedule (by kind) and the lateness histogram are exported."""
    schedules.trigger("ping")
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    text = web.get("/metrics").content.decode()
    samples = {
        (s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }
    labels = {("schedule", "ping"), ("queue", "t1")}
    assert samples[("worqr_schedule_runs_total", frozenset({*labels, ("kind", "trigger")}))] == 1
    assert samples[("worqr_schedule_runs_total", frozenset({*labels, ("kind", "tick")}))] == 0
    assert samples[("worqr_schedule_lateness_seconds_count", frozenset(labels))] == 0
    assert samples[("worqr_schedule_paused", frozenset(labels))] == 0
    assert ("worqr_schedule_next_run_timestamp_seconds", frozenset(labels)) in samples
