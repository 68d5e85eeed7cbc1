"""The Schedules page in a real headless Chromium against a real Daphne: the countdown to the next
run moves, and "Trigger now" makes a task appear (as the last run, linked to its page)."""

import os
import re

import pytest

from queues import Queue, schedules
from queues.engine import schedules as engine_schedules
from queues.engine.schedule_settings import parse
from tests.browser import CHROMIUM
from tests.support.browser import shot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium (make browser)")


def test_schedules_page_countdown_and_trigger(operator, server, page, client):
    """Logged in with manage_schedules."""
    # the countdown ticks down, pause shows 'paused', and trigger puts a pending task in the row's last run, without a
    # reload.
    expect = playwright_api.expect
    engine_schedules.sync(
        client,
        [
            parse(
                "hourly-report", {"queue": "t1", "cron": "0 * * * *", "timezone": "Europe/Paris", "payload": "report"}
            ),
            parse("ping", {"queue": "t1", "every": 3600, "payload": "ping"}),
        ],
    )
    page.goto(server.url + "/queues/schedules/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    expect(page.locator("#wq-status")).to_have_text("live")
    page.evaluate("window.__noReload = true")
    row = page.locator("tr[data-schedule=ping]")
    expect(row).to_contain_text("Every 3600 seconds")
    expect(page.locator("tr[data-schedule=hourly-report]")).to_contain_text("Every hour (Europe/Paris time)")
    countdown = row.locator(".wq-countdown")
    expect(countdown).to_have_text(re.compile(r"\d+m \d\ds|\d+\.\d s"))
    before = countdown.inner_text()
    expect(countdown).not_to_have_text(before)  # it moves (client-side clock, once a second)
    shot(page, "schedules-1")

    row.locator("button[data-action='trigger now']").click()
    expect(page.locator("#wq-flash")).to_contain_text("Schedule ping triggered")
    task_id = schedules.get("ping").last_task_id
    link = row.locator(f"a[href='/queues/task/{task_id}/']")
    expect(link).to_be_visible()
    expect(row.locator(".wq-outcome")).to_have_text("pending")
    assert Queue("t1").get(task_id).payload == "ping"

    row.locator("button[data-action=pause]").click()
    expect(row.locator(".wq-state")).to_have_text("paused")
    expect(countdown).to_have_text("")
    assert schedules.get("ping").paused
    shot(page, "schedules-2")
    assert page.evaluate("window.__noReload") is True
    link.click()
    expect(page.locator("body")).to_contain_text("pending")
