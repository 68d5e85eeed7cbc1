"""End to end, in a real headless Chromium against a real Daphne and a real worker process:
log in, watch a queue change live, cancel a running task, see a failure grouped, all under
the site's Content-Security-Policy (a violation fails the test). Screenshots go to
test-artifacts/."""

import os
import re

import pytest

from queues import Queue
from tests.browser import CHROMIUM, DaphneServer, enqueue_elsewhere
from tests.conftest import records, wait_for, wait_registered
from tests.support.browser import shot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium (make browser)")


def test_live_queue_page_cancel_and_failure_history(operator, server, page, workers, client):
    """The whole loop a member of staff sees, without ever reloading the page."""
    expect = playwright_api.expect
    page.goto(server.url + "/queues/")
    expect(page).to_have_url(re.compile(r"/admin/login/"))
    page.fill("#id_username", "operator")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    expect(page.locator("#wq-status")).to_have_text("live")
    shot(page, "1-overview-empty")

    # A queue appears on the overview when another process enqueues on it.
    (first,) = enqueue_elsewhere("t1", "hello from another process")
    expect(page.locator("tr[data-queue=t1]")).to_be_visible()
    page.click("tr[data-queue=t1] a")
    expect(page.locator("#wq-status")).to_have_text("live")
    expect(page.locator(f"#wq-pending tr[data-id='{first}']")).to_be_visible()
    page.evaluate("window.__noReload = true")

    # Enqueued elsewhere: it shows up in the pending list without a reload.
    (second,) = enqueue_elsewhere("t1", "second one")
    expect(page.locator(f"#wq-pending tr[data-id='{second}']")).to_be_visible()
    expect(page.locator("[data-count=pending]")).to_have_text("2")
    shot(page, "2-queue-pending")

    # A worker drains them; then a slow task is in process, with its worker and elapsed time.
    worker = workers(["t1"], concurrency=2, name="e2e-worker")
    wait_registered(client, "e2e-worker")
    expect(page.locator("[data-count=pending]")).to_have_text("0")
    (slow,) = enqueue_elsewhere("t1", '{"sleep": 30}')
    row = page.locator(f"#wq-active tr[data-id='{slow}']")
    page.click(".wq-qtabs a[data-tab=active]")  # one tab shows at a time: In process (1)
    expect(row).to_be_visible()
    expect(row.locator(".wq-worker")).to_have_text("e2e-worker")
    expect(row.locator("[data-since]")).to_have_text(re.compile(r"\d+\.\d s"))
    shot(page, "3-in-process")

    # Cancel it from the page: it leaves the in-process list, and Redis no longer has it.
    row.locator("button[data-action=cancel]").click()
    expect(page.locator("#wq-flash")).to_contain_text(f"Task {slow} cancelled")
    expect(row).to_have_count(0)
    wait_for(lambda: Queue("t1").get(slow) is None, timeout=20, message="the cancelled task to be gone")
    assert client.zscore("worqr:{t1}:active", slow) is None
    wait_for(
        lambda: any(r["id"] == slow and r["outcome"] == "cancelled" for r in records(client, "t1")),
        timeout=20,
        message="the worker to stop the task",
    )
    shot(page, "4-cancelled")

    # A failing task shows up in the failure history, grouped by its error.
    (failing,) = enqueue_elsewhere("t1", '{"fail": "always"}', retries=0)
    group = page.locator("#wq-history details.wq-group").filter(has_text="ValueError")
    page.click(".wq-qtabs a[data-tab=history]")
    expect(group).to_be_visible()
    expect(group.locator(".wq-count")).to_have_text("1×")
    group.locator("summary").first.click()
    expect(group.locator(f"a[href='/queues/task/{failing}/']")).to_be_visible()
    page.click(".wq-qtabs a[data-tab=failed]")
    expect(page.locator(f"#wq-failed tr[data-id='{failing}']")).to_be_visible()
    shot(page, "5-failure-history")

    # In another tab: the workers page and the overview with its throughput chart.
    other = page.context.new_page()
    other.goto(server.url + "/queues/workers/")
    expect(other.locator("tr[data-worker=e2e-worker] td").nth(5)).to_have_text("0")
    shot(other, "6-workers")
    other.goto(server.url + "/queues/")
    expect(other.locator("tr[data-queue=t1] td").nth(4)).to_have_text("1")
    expect(other.locator("#wq-chart rect.wq-bar-fail")).to_have_count(1)
    shot(other, "7-overview")
    other.close()

    # The server goes away: the page says so; it comes back: the page reconnects and resyncs.
    worker.kill()
    server.stop()
    expect(page.locator("#wq-banner")).to_be_visible()
    expect(page.locator("#wq-status")).to_have_text("disconnected")
    shot(page, "8-disconnected")
    (later,) = enqueue_elsewhere("t1", "while the dashboard was down")
    restarted = DaphneServer(port=server.port).wait_ready()
    try:
        expect(page.locator("#wq-status")).to_have_text("live", timeout=40_000)
        expect(page.locator("#wq-banner")).to_be_hidden()
        # The killed worker was idle, so the enqueue handed the task to it (Redis can't know it
        # died until a live worker reaps it): the task shows, pending or in process.
        # (listed live in the Pending or the In process tab, whichever the page shows)
        expect(page.locator(f"#wq-pending tr[data-id='{later}'], #wq-active tr[data-id='{later}']")).to_have_count(1)
        shot(page, "9-reconnected")
    finally:
        restarted.stop()
    assert page.evaluate("window.__noReload") is True
    assert page.csp_violations == []  # the dashboard runs under its CSP: no inline script or style
