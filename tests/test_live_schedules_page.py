"""The Schedules page's form: create, change and delete a schedule made at run time, behind
queues.change_schedule (manage_schedules is not enough), CSRF-checked, audited; a settings'
schedule is marked so and has no Change."""

from django.test import Client
from django.urls import reverse

from queues.engine import commands, schedules
from queues.engine.schedule_settings import parse_all
from queues.models import AuditLog
from tests.engine_calls import take
from tests.test_dashboard_views import make_user


def test_create_change_delete_from_the_page(client, db):
    """The form creates, changes and deletes a live schedule with change_schedule only, CSRF-checked, confirmed, audited; bad fields and settings' schedules are refused."""
    schedules.sync(client, parse_all({"declared": {"queue": "lp", "every": 60}}))
    manager = Client()
    manager.force_login(make_user("m", perms=["view_dashboard", "manage_schedules"]))
    page = manager.get(reverse("queues:schedules")).content.decode()
    assert "from settings" in page and "New schedule" not in page
    r = manager.post(reverse("queues:schedule-create"), {"name": "form-s", "queue": "lp", "every": "5"})
    assert r.status_code == 403 and schedules.get(client, "form-s") is None
    strict = Client(enforce_csrf_checks=True)
    editor = make_user("e", perms=["view_dashboard", "change_schedule"])
    strict.force_login(editor)
    assert (
        strict.post(reverse("queues:schedule-create"), {"name": "form-s", "queue": "lp", "every": "5"}).status_code
        == 403
    )
    web = Client()
    web.force_login(editor)
    assert "New schedule" in web.get(reverse("queues:schedules")).content.decode()
    json = {"HTTP_ACCEPT": "application/json"}
    r = web.post(reverse("queues:schedule-create"), {"name": "form-s", "queue": "lp", "every": "x"}, **json)
    assert r.status_code == 400 and "every" in r.json()["message"]
    r = web.post(reverse("queues:schedule-create"), {"name": "form-s", "queue": "lp", "every": "0"}, **json)
    assert r.status_code == 400 and "'every'" in r.json()["message"] and schedules.get(client, "form-s") is None
    r = web.post(reverse("queues:schedule-create"), {"name": "declared", "queue": "lp", "every": "5"}, **json)
    assert r.status_code == 409
    form = {"name": "form-s", "queue": "lp", "every": "5", "payload": "hi", "overlap-given": "1", "retries": "2"}
    r = web.post(reverse("queues:schedule-create"), form, **json)
    assert r.status_code == 200, r.content
    s = schedules.get(client, "form-s")
    assert (s.every, s.payload, s.overlap, s.options) == (5, "hi", False, {"retries": 2})
    page = web.get(reverse("queues:schedules")).content.decode()
    assert "made here" in page and reverse("queues:schedule-update", args=["form-s"]) in page
    assert reverse("queues:schedule-update", args=["declared"]) not in page
    r = web.post(reverse("queues:schedule-update", args=["form-s"]), {"cron": "0 3 * * *"}, **json)
    assert r.status_code == 200 and schedules.get(client, "form-s").cron == "0 3 * * *"
    r = web.post(reverse("queues:schedule-update", args=["declared"]), {"every": "5"}, **json)
    assert r.status_code == 409
    r = web.post(reverse("queues:schedule-delete", args=["form-s"]), {}, **json)
    assert r.status_code == 400 and schedules.get(client, "form-s") is not None  # not confirmed
    r = web.post(reverse("queues:schedule-delete", args=["form-s"]), {"confirm": "yes"}, **json)
    assert r.status_code == 200 and schedules.get(client, "form-s") is None
    actions = list(AuditLog.objects.order_by("at").values_list("action", flat=True))
    assert actions == ["schedule_create", "schedule_update", "schedule_delete"]


def test_a_schedules_page_shows_next_runs_last_runs_and_lateness(client, db):
    """A schedule's page lists its next 5 runs and its ended runs with outcomes; an unknown one is 404."""
    schedules.sync(client, parse_all({"hourly": {"queue": "sp", "every": 3600, "payload": "tick"}}))
    task_id = schedules.trigger(client, "hourly")
    (task,) = take(client, "sp")
    commands.finish("sp", "w", [(task.id, task.lease, "", False)], result_ttl=0).run(client)
    web = Client()
    web.force_login(make_user("v", perms=["view_dashboard"]))
    listing = web.get(reverse("queues:schedules")).content.decode()
    assert f'href="{reverse("queues:schedule", args=["hourly"])}"' in listing
    html = web.get(reverse("queues:schedule", args=["hourly"])).content.decode()
    next_runs = html.split('data-field="next">')[1].split("</td>")[0]
    assert next_runs.count(", ") == 4  # five next runs
    assert f'data-run="{task_id}"' in html and "wq-state-completed" in html and "trigger" in html
    assert web.get(reverse("queues:schedule", args=["nosuch"])).status_code == 404


def test_the_list_shows_a_payload_as_a_preview_and_its_page_fills_the_form(client, db):
    """A 200,000-character payload or a 1,000-character cron (the longest) leaves the list and its live section under 50 KB."""
    # The list's Change form leaves such a payload empty (kept as it is on Save); the schedule's own page fills
    # its form with a payload of up to FIELD_MAX characters, whole.
    from queues.dashboard import feeds, sections
    from queues.engine import live_schedules

    quotes = '"' * 200_000  # escaped six times over in HTML (&quot;)
    live_schedules.create(client, "big", queue="lp", every=60, payload=quotes)
    live_schedules.create(client, "long-cron", queue="lp", cron="0," * 495 + "0 3 * * *", payload="p")
    live_schedules.create(client, "mid", queue="lp", every=60, payload='"' * 5000)
    live_schedules.create(client, "small", queue="lp", every=60, payload="hi")
    web = Client()
    web.force_login(make_user("e", perms=["view_dashboard", "change_schedule", "manage_schedules"]))
    page = web.get(reverse("queues:schedules")).content.decode()
    assert len(page.encode()) < 50_000, len(page.encode())
    assert 'placeholder="as it is: ' + "&quot;" * 119 + '…"' in page and "&quot;" * 121 not in page
    assert 'name="payload" value="hi"' in page  # shown whole: filled in as before
    assert reverse("queues:schedule-update", args=["big"]) in page
    snap = feeds.feed_for(client, "schedules", None, {}).snapshot()
    html = sections.render(snap, list(sections.SECTIONS["schedules"]), ["change_schedule", "manage_schedules"])
    assert all(len(h.encode()) < 50_000 for h in html.values()), {k: len(h) for k, h in html.items()}
    mid = web.get(reverse("queues:schedule", args=["mid"])).content.decode()
    assert 'name="payload" value="' + "&quot;" * 5000 + '"' in mid
    big = web.get(reverse("queues:schedule", args=["big"])).content.decode()
    assert len(big.encode()) < 50_000 and "payload is not filled in" in big
    viewer = Client()
    viewer.force_login(make_user("v", perms=["view_dashboard"]))
    assert 'name="payload"' not in viewer.get(reverse("queues:schedule", args=["mid"])).content.decode()
    r = web.post(reverse("queues:schedule-update", args=["big"]), {"queue": "lp", "payload": ""})
    assert r.status_code == 302 and schedules.get(client, "big").payload == quotes  # an empty field keeps it
