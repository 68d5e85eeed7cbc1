"""Ended tasks, the Failures tab and the queue page's small things in a real headless Chromium
against a real Daphne: an ended task's page and its "Run again", a task's Delete asking for
confirmation, "Retry all failed" and "Purge" hidden at a count of 0."""

import os

import pytest

from queues import Queue
from queues.engine import commands, readmodel
from tests.browser import CHROMIUM
from tests.engine_calls import fail, take
from tests.support.browser import login, shot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium (make browser)")


def test_ended_task_run_again_failures_tab_and_delete_confirmation(operator, server, page, client):
    """In Chromium: an ended task's page and Run again, the Failures tab, Retry all/Purge hidden at 0, Delete only once confirmed."""
    expect = playwright_api.expect
    done = Queue("hb").enqueue("the payload")
    (task,) = take(client, "hb")
    commands.finish("hb", "w", [(task.id, task.lease, "", False)], result_ttl=0).run(client)
    login(page, server.url + f"/queues/task/{done}/")
    expect(page.locator("[data-field=record]")).to_contain_text("This task ended")
    expect(page.locator("[data-field=state]")).to_have_text("completed")
    expect(page.locator(".wq-payload-full")).to_have_text("the payload")
    # the queue has nothing failed or pending: no Retry all failed, no Purge
    page.goto(server.url + "/queues/q/hb/")
    expect(page.locator("button[data-action='retry all failed']")).to_have_count(0)
    expect(page.locator(".wq-purge")).to_have_count(0)
    page.goto(server.url + f"/queues/task/{done}/")
    page.locator("button[data-action='run again']").click()
    expect(page.locator("#wq-flash")).to_contain_text(f"Task {done} run again as hb-")
    (again,) = readmodel.pending(client, "hb")
    assert again.payload == "the payload" and readmodel.again_of(client, again.id) == done
    shot(page, "ended-task")

    Queue("hb").enqueue("will fail")
    failed = [t for t in take(client, "hb", count=2) if t.payload == "will fail"][0]
    fail(client, failed, error="KeyError: 'user 7'")
    page.goto(server.url + "/queues/failures/")
    group = page.locator(".wq-failure-group")
    expect(group).to_have_count(1)
    expect(group).to_contain_text("KeyError")
    expect(group.locator(f"a[href='/queues/task/{failed.id}/']")).to_be_visible()
    shot(page, "failures-tab")
    page.goto(server.url + "/queues/q/hb/")
    expect(page.locator("button[data-action='retry all failed']")).to_have_count(1)

    page.goto(server.url + f"/queues/task/{failed.id}/")
    expect(page.locator("#wq-status")).to_have_text("live")
    delete = page.locator(".wq-confirm-delete")
    expect(delete.locator("button[type=submit]")).to_be_hidden()  # behind "Delete…"

    def opened():  # (a live update of the section draws it again, closed)
        if not delete.evaluate("d => d.open"):
            delete.locator("summary").click()
        return delete

    opened().locator("button[type=submit]").click()  # unconfirmed: the browser refuses to send it
    assert readmodel.task(client, failed.id) is not None
    opened().locator("input[name=confirm]").check()
    opened().locator("button[type=submit]").click()
    expect(page.locator("#wq-flash")).to_contain_text("deleted")
    assert readmodel.task(client, failed.id) is None
