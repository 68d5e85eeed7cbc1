"""The small things of the dashboard in a real headless Chromium: Run now on a delayed task, a
single Delete that asks (the dialog; a page of its own without the script), durations over a day
in days, the search's "looked at" note readable in both themes, a batch page's state filter and
actions with its counts in words, and a worker told to go quiet from its page."""

import os

import pytest

from queues import Queue
from queues.engine import Batch, readmodel, workflows
from tests.browser import CHROMIUM
from tests.conftest import wait_registered
from tests.engine_calls import fail, finish, take
from tests.support.browser import login

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium (make browser)")

#: The contrast ratio (WCAG) of an element's text against the first opaque background behind it.
CONTRAST = """(el) => {
  const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  let bg = null;
  for (let e = el; e && !bg; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length < 4 || c[3] > 0.9) bg = c;
  }
  bg = bg || [255, 255, 255];
  const fg = rgb(getComputedStyle(el).color);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""


def test_run_now_and_a_delete_that_asks(operator, server, page, client):
    """Run now moves a delayed task to pending; Delete asks: dismissed, the task stays; accepted, it goes."""
    expect = playwright_api.expect
    q = Queue("small-b")
    later = q.enqueue("later", delay=2 * 86400 + 3 * 3600 + 120)
    q.enqueue("soon", delay=600)
    login(page, server.url + "/queues/q/small-b/?tab=delayed")
    expect(page.locator("#wq-status")).to_have_text("live")
    row = page.locator(f'#wq-delayed tr[data-id="{later}"]')
    expect(row.locator("td[data-until]")).to_have_text("2 d 3 h")  # over a day: in days
    row.get_by_role("button", name="Run now").click()
    expect(page.locator(".wq-flash")).to_contain_text("it runs next")
    expect(page.locator('.wq-qtabs a[data-tab="delayed"]')).to_have_text("Delayed (1)")
    assert readmodel.task(client, later).state == "pending"

    failed = q.enqueue("bad")
    (task,) = [t for t in take(client, "small-b", count=5) if t.id == failed]
    fail(client, task)
    page.goto(server.url + "/queues/q/small-b/?tab=failed")
    expect(page.locator("#wq-status")).to_have_text("live")
    delete = page.locator(f'#wq-failed tr[data-id="{failed}"]').get_by_role("button", name="Delete")
    page.once("dialog", lambda d: d.dismiss())
    delete.click()
    page.wait_for_timeout(300)  # a dismissed dialog sends nothing: there is nothing to wait for
    assert readmodel.task(client, failed) is not None
    page.once("dialog", lambda d: (d.message.startswith(f"Delete task {failed}?") and d.accept()) or d.dismiss())
    delete.click()
    expect(page.locator(".wq-flash")).to_contain_text(f"Task {failed} deleted")
    assert readmodel.task(client, failed) is None


def test_delete_without_the_script_asks_on_a_page(operator, server, page, client):
    """With the script off, Delete opens a confirmation page; its box and button delete the task."""
    expect = playwright_api.expect
    q = Queue("small-nojs")
    tid = q.enqueue("bad")
    (task,) = take(client, "small-nojs")
    fail(client, task)
    context = page.context.browser.new_context(java_script_enabled=False)
    try:
        plain = context.new_page()
        login(plain, server.url + "/queues/q/small-nojs/?tab=failed")
        plain.locator(f'#wq-failed tr[data-id="{tid}"]').get_by_role("button", name="Delete").click()
        expect(plain.locator("h1")).to_contain_text(f"Delete task {tid}?")
        assert readmodel.task(client, tid) is not None
        plain.check('input[name="confirm"]')
        plain.get_by_role("button", name="Delete").click()
        expect(plain.locator("ul.messagelist")).to_contain_text(f"Task {tid} deleted")
        assert readmodel.task(client, tid) is None
    finally:
        context.close()


def test_looked_at_note_is_readable_in_both_themes(operator, server, page, client):
    """The search's "looked at" note has a contrast of at least 4.5:1 against its heading, light and dark."""
    expect = playwright_api.expect
    Queue("small-s").enqueue("findme")
    login(page, server.url + "/queues/search/?q=queue%3Asmall-s")
    note = page.locator("#wq-results h2 .wq-seen")
    expect(note).to_contain_text("looked at")
    ratios = {}
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        ratios[theme] = note.evaluate(CONTRAST)
    assert min(ratios.values()) >= 4.5, ratios


def test_batch_page_filters_and_acts(operator, server, page, client):
    """A batch page: counts in words, the Failed filter lists only failed tasks, Retry queues them again."""
    expect = playwright_api.expect
    b = Batch(description="browser batch")
    ids = b.enqueue_many("small-batch", ["f1", "ok", "wait"])
    b.close()
    for t in take(client, "small-batch", count=2):
        (fail if t.payload == "f1" else finish)(client, t)
    workflows.drain_all(client, "small-batch")
    login(page, server.url + f"/queues/batches/{b.id}/")
    expect(page.locator('[data-field="summary"]')).to_contain_text("1 pending, 1 completed, 1 failed")
    page.locator(".wq-qtabs").get_by_role("link", name="failed").click()
    rows = page.locator("#wq-batch-tasks tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(ids[0])
    page.get_by_role("button", name="Retry its failed tasks").click()
    expect(page.locator(".wq-flash")).to_contain_text("1 failed tasks queued again")
    assert readmodel.task(client, ids[0]).state == "pending"


def test_worker_told_to_go_quiet_from_its_page(operator, server, page, client, workers):
    """Quiet on a worker's page (confirmed): the page shows "quiet" once its heartbeat says so."""
    expect = playwright_api.expect
    workers(["t4"], name="quiet-browser")
    wait_registered(client, "quiet-browser")
    login(page, server.url + "/queues/workers/quiet-browser/")
    expect(page.locator("#wq-status")).to_have_text("live")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Quiet").click()
    expect(page.locator(".wq-flash")).to_contain_text("told to go quiet")
    page.reload()
    expect(page.locator('[data-field="quiet"]')).to_have_text("quiet: takes no more tasks", timeout=15000)
    assert readmodel.worker(client, "quiet-browser")["quiet"]
