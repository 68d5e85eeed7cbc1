"""Dashboard round two, end to end in a real headless Chromium against a real Daphne and a real
worker: search from the box, a bulk retry with its progress, a task's progress bar moving and a
log line appearing live, the worker page and the history page; keyboard, dark mode and a 390 px
wide screen. With WORQR_SCREENSHOTS=1 (``make screenshots``) it makes the README's screenshots
(docs/screenshots/)."""

import json
import os
import re

import pytest

from queues import Queue
from queues.engine import readmodel
from tests.browser import CHROMIUM, launch_chromium
from tests.conftest import ROOT, wait_for, wait_registered
from tests.support.browser import REPORT_CSP, WAIT, shot
from tests.support.dashboard import failed_tasks

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium")

SCREENSHOTS = ROOT / "docs" / "screenshots"


def readme_shot(page, name):
    """A screenshot in test-artifacts; with WORQR_SCREENSHOTS=1 (``make screenshots``) also the
    README's, in docs/screenshots/ (so a test run leaves the committed ones alone)."""
    if os.environ.get("WORQR_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    shot(page, f"readme-{name}")


@pytest.fixture
def browser_context(server):
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        violations = []

        def context(**options):
            ctx = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
            ctx.set_default_timeout(WAIT)
            ctx.add_init_script(REPORT_CSP)
            ctx.on("console", lambda m: m.type == "error" and "CSP" in m.text and violations.append(m.text))
            return ctx

        context.violations = violations
        try:
            yield context
        finally:
            browser.close()


def login(ctx, server, next_path="/queues/"):
    page = ctx.new_page()
    page.goto(server.url + next_path)
    page.fill("#id_username", "operator")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    return page


def test_search_bulk_retry_progress_and_log_live(operator, server, browser_context, workers, client):
    """Search, bulk retry, a moving progress bar and a log line, all live, under the CSP."""
    expect = playwright_api.expect
    ctx = browser_context()
    worker = workers(["prog"], concurrency=2, name="e2e-prog")
    wait_registered(client, "e2e-prog")
    tid = Queue("prog").enqueue(json.dumps({"steps": 4, "gate": True}), tags=["customer:42", "invoice"])
    wait_for(lambda: (t := Queue("prog").get(tid)) and t.state == "active", 30, message="the task to start")

    # The task page: the progress bar moves and log lines appear as the handler reports.
    page = login(ctx, server, f"/queues/task/{tid}/")
    expect(page.locator("#wq-status")).to_have_text("live")
    client.rpush(f"test:gate:{tid}", 1)
    expect(page.locator("#wq-task-progress")).to_have_attribute("value", "25.0")
    expect(page.locator("#wq-log")).to_contain_text("step 1 of 4")
    client.rpush(f"test:gate:{tid}", 1)
    expect(page.locator("#wq-task-progress")).to_have_attribute("value", "50.0")
    expect(page.locator("#wq-log")).to_contain_text("step 2 of 4")
    expect(page.locator("[data-field=progress]")).to_have_text("50 %")
    readme_shot(page, "task-progress-log")

    # The worker page: the task in process, with its progress.
    page.goto(server.url + "/queues/workers/e2e-prog/")
    expect(page.locator(f"tr[data-id='{tid}'] progress")).to_have_attribute("value", "50.0")
    client.rpush(f"test:gate:{tid}", 1)
    expect(page.locator(f"tr[data-id='{tid}'] progress")).to_have_attribute("value", "75.0")
    readme_shot(page, "worker")

    # The queue page's in-process table has the bar too.
    page.goto(server.url + "/queues/q/prog/")
    expect(page.locator(f"#wq-active tr[data-id='{tid}'] progress")).to_have_attribute("value", "75.0")
    readme_shot(page, "queue")
    client.rpush(f"test:gate:{tid}", 1)
    expect(page.locator(f"#wq-active tr[data-id='{tid}']")).to_have_count(0)

    # Search from the box on any page, with the keyboard; then a bulk retry of what it found.
    failed = failed_tasks(client, "bulkq", 3, tags=["batch:7"])
    page.goto(server.url + "/queues/")
    for _ in range(40):  # the search box is reachable with Tab
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "wq-search":
            break
    assert page.evaluate("document.activeElement.id") == "wq-search"
    page.keyboard.type("tag:batch:7 state:failed")
    page.keyboard.press("Enter")
    expect(page.locator("#wq-results-table tbody tr[data-id]")).to_have_count(3)
    page.check("#wq-select-page")
    expect(page.locator("#wq-chosen")).to_have_text("3 chosen")
    page.check("input[name=confirm]")
    readme_shot(page, "search")
    page.click("button[data-bulk=retry]")
    expect(page.locator("#wq-job-text")).to_have_text("Done: 3 of 3 queued again.")
    readme_shot(page, "bulk")
    assert all(Queue("bulkq").get(i).state == "pending" for i in failed)

    # The history page (SVG), the workers page (with the gone), the overview.
    page.goto(server.url + "/queues/q/prog/history/?span=1h")
    expect(page.locator(".wq-chart svg").first).to_be_visible()
    readme_shot(page, "history")
    worker.signal(15)
    worker.wait(30)
    page.goto(server.url + "/queues/workers/")
    expect(page.locator("tr[data-gone=e2e-prog]")).to_be_visible()
    readme_shot(page, "workers")
    page.goto(server.url + "/queues/")
    readme_shot(page, "overview")
    assert browser_context.violations == []


def test_dark_mode_and_a_390px_screen(operator, server, browser_context, client):
    """The dashboard follows the admin's dark mode and fits a 390 px wide screen."""
    Queue("t1").enqueue("x", tags=["mobile"])
    ctx = browser_context(color_scheme="dark")
    page = login(ctx, server, "/queues/q/t1/")
    playwright_api.expect(page.locator("#wq-status")).to_have_text("live")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert (
        re.match(r"rgb\((\d+), (\d+), (\d+)\)", background)
        and sum(int(x) for x in re.findall(r"\d+", background)[:3]) < 200
    ), background
    readme_shot(page, "queue-dark")
    phone = ctx.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(server.url + "/queues/search/?q=tag:mobile")
    playwright_api.expect(phone.locator("#wq-results-table tbody tr[data-id]")).to_have_count(1)
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 400, f"the page is {width} px wide at 390 px"
    readme_shot(phone, "search-390px")
    assert browser_context.violations == []


def test_a_bulk_job_is_stopped_with_its_stop_button(operator, server, browser_context, client):
    """Delete on all 60,000 matching tasks, then Stop on its page: the job stops before its next batch and ..."""
    # ... the page says how far it went; the rest stay. Redis holds the job's writes (CLIENT PAUSE WRITE) from
    # its first batch until Stop was pressed, so the button is pressed mid-job whatever the machine's speed.
    expect, n = playwright_api.expect, 60_000
    Queue("stopq").enqueue_many(["x"] * n, delay=3600)
    page = login(browser_context(), server, "/queues/search/?q=queue%3Astopq+state%3Adelayed")
    page.check("#wq-all")
    page.check("input[name=confirm]")
    page.click("button[data-bulk=delete]")
    expect(page.locator("#wq-job-stop button")).to_be_visible()
    job_id = page.url.rstrip("/").rsplit("/", 1)[1]
    wait_for(lambda: int((readmodel.bulk_job(client, job_id) or {}).get("changed") or 0) > 0, 60, message="a batch")
    client.execute_command("CLIENT", "PAUSE", 120000, "WRITE")
    try:
        page.click("#wq-job-stop button")
        page.wait_for_timeout(500)  # the stop's write reaches Redis and waits there too
    finally:
        client.execute_command("CLIENT", "UNPAUSE")
    expect(page.locator("#wq-job-text")).to_have_text(
        re.compile(r"Stopped after \d+ of 60000 deleted: stopped by operator\.")
    )
    expect(page.locator("#wq-job-stop")).to_be_hidden()
    changed = int(readmodel.bulk_job(client, job_id)["changed"])
    assert 0 < changed < n and Queue("stopq").counts()["delayed"] == n - changed
    assert browser_context.violations == []
