"""The queue page at 1280×800 in a real headless Chromium: a busy queue (pending, in process,
delayed, failed tasks, a lock held, a limit set) fits one screen; one tab shows at a time, its
links work without the script (``?tab=delayed``) and with it (in place, or ``#delayed``); a tab's
count moves live; "Retry all failed" and "Purge" show only when there is something to act on."""

import os

import pytest

from queues import Queue
from tests.browser import CHROMIUM
from tests.engine_calls import fail, take
from tests.support.browser import login, shot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium (make browser)")


#: Where the queue page's content ends, in px (the scroll height is never less than the viewport's).
CONTENT_BOTTOM = "Math.ceil(document.querySelector('.wq-qpage').getBoundingClientRect().bottom)"


def _busy_queue(client, name):
    q = Queue(name)
    q.enqueue("fails")
    q.enqueue("locked one", lock="account-7")
    q.enqueue_many([f"task {i}" for i in range(8)])
    for i in range(3):
        q.enqueue(f"later {i}", delay=3600)
    q.set_limits(concurrency=4, rate="100/m")
    taken = take(client, name, count=3)
    fail(client, taken[0], error="ValueError: bad input 42")
    return q


def test_busy_queue_fits_one_screen(operator, server, page, client):
    """At 1280x800 a queue with pending, running, delayed, failed tasks, a lock and a limit is at most 800 px tall."""
    expect = playwright_api.expect
    _busy_queue(client, "fit")
    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, server.url + "/queues/q/fit/")
    expect(page.locator("#wq-status")).to_have_text("live")
    tabs = page.locator(".wq-qtabs")
    for text in ("In process (2)", "Pending (", "Delayed (3)", "Failed (1)", "Locks (1)", "Limits", "Charts"):
        expect(tabs).to_contain_text(text)
    expect(page.locator("#wq-active")).to_be_visible()  # the first tab with something
    for hidden in ("#wq-pending", "#wq-delayed", "#wq-failed", "#wq-locks", "#wq-limits", "#wq-charts"):
        expect(page.locator(hidden)).to_be_hidden()
    heights, content = {}, {}
    for tab in ("active", "pending", "delayed", "failed", "locks", "limits", "charts"):
        page.click(f'.wq-qtabs a[data-tab="{tab}"]')
        expect(page.locator(f"#wq-{tab}")).to_be_visible()
        heights[tab] = page.evaluate("document.scrollingElement.scrollHeight")
        content[tab] = page.evaluate(CONTENT_BOTTOM)
        if tab == "pending":
            shot(page, "queue-1280x800")  # the longest tab
    print(f"queue page at 1280x800, per tab: scroll height {heights}, content ends at {content}")
    assert max(heights.values()) <= 800, heights
    assert "tab=charts" in page.url  # the address names the tab shown: a reload shows it again
    page.reload()
    expect(page.locator("#wq-charts")).to_be_visible()
    expect(page.locator(".wq-qtabs a[aria-current]")).to_have_text("Charts")


def test_tabs_work_without_script_and_move_live(operator, server, page, client):
    """?tab=delayed shows that tab with the script off; #delayed opens it with it on; a count moves live."""
    expect = playwright_api.expect
    q = Queue("tabs")
    q.enqueue("now")
    login(page, server.url + "/queues/q/tabs/")
    expect(page.locator("#wq-status")).to_have_text("live")
    expect(page.locator("#wq-pending")).to_be_visible()
    expect(page.locator("#wq-delayed")).to_be_hidden()
    expect(page.locator('.wq-qtabs a[data-tab="delayed"]')).to_have_class("wq-tab wq-tab-empty")
    # Nothing failed, nothing pending to purge in a queue of only delayed tasks: no such buttons.
    expect(page.get_by_role("button", name="Retry all failed")).to_have_count(0)
    q.enqueue("later", delay=3600)
    expect(page.locator('.wq-qtabs a[data-tab="delayed"]')).to_have_text("Delayed (1)")  # live
    page.goto(server.url + "/queues/q/tabs/#delayed")
    expect(page.locator("#wq-delayed")).to_be_visible()
    expect(page.locator("#wq-pending")).to_be_hidden()

    context = page.context.browser.new_context(java_script_enabled=False)
    try:
        plain = context.new_page()
        login(plain, server.url + "/queues/q/tabs/?tab=delayed")
        expect(plain.locator("#wq-delayed")).to_be_visible()
        expect(plain.locator("#wq-pending")).to_be_hidden()
        expect(plain.locator(".wq-qtabs a[aria-current]")).to_have_text("Delayed (1)")
        plain.click('.wq-qtabs a[data-tab="pending"]')
        expect(plain.locator("#wq-pending")).to_be_visible()
        expect(plain.locator("#wq-delayed")).to_be_hidden()
        expect(plain.get_by_text("Purge pending…")).to_be_visible()
    finally:
        context.close()
