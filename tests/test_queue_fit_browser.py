"""The queue page at 1280×800 in a real headless Chromium: only the sections with something in
them show (anchors name them all, with their counts), and a section appears live when something
arrives in it. (The page is still taller than 800 px with limits and the throughput chart: its
height is printed and kept as a screenshot.)"""

import os

import pytest

from queues import Queue
from tests.browser import CHROMIUM
from tests.engine_calls import fail, take
from tests.support.browser import shot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium (make browser)")


def test_queue_page_shows_only_sections_with_something(operator, server, page, client):
    """In Chromium at 1280x800: empty sections hidden, the others shown, anchors with counts, a section appearing live."""
    expect = playwright_api.expect
    Queue("fit").enqueue_many(["first", "second", "third", "fourth"])
    (task,) = take(client, "fit")
    fail(client, task, error="ValueError: bad input 42")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server.url + "/queues/q/fit/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    expect(page.locator("#wq-status")).to_have_text("live")
    for hidden in ("#wq-active", "#wq-delayed", "#wq-blocked", "#wq-locks"):
        expect(page.locator(hidden)).to_be_hidden()
    for shown in ("#wq-pending", "#wq-failed", "#wq-history"):
        expect(page.locator(shown)).to_be_visible()
    height = page.evaluate("document.documentElement.scrollHeight")
    shot(page, "queue-1280x800")
    print(f"queue page height at 1280x800: {height}px")
    expect(page.locator(".wq-anchors")).to_contain_text("Delayed (0)")
    Queue("fit").enqueue("later", delay=3600)
    expect(page.locator("#wq-delayed")).to_be_visible()  # live: the section shows once it has something
