"""The task controls on the live queue page, in a real headless Chromium against a real Daphne:
a task that expires appears under Expired, and a RateLimited hold under Limits, without a reload."""

import os
import time

import pytest

from queues import Queue
from tests.browser import CHROMIUM
from tests.engine_calls import take
from tests.test_controls import _limited
from tests.test_live_browser import page, server, viewer  # noqa: F401  (fixtures)

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium (make browser)")


def test_expiry_and_a_hold_show_live_on_the_queue_page(server, page, client):  # noqa: F811
    """The open queue page counts and lists the expired task, then shows the hold, as they happen."""
    expect = playwright_api.expect
    q = Queue("ctl-live")
    q.enqueue("warm")  # the queue exists
    page.goto(server.url + "/queues/q/ctl-live/")
    expect(page.locator("#wq-status")).to_have_text("live")
    expect(page.locator("#wq-expired")).to_contain_text("Expired (0)")
    q.pause()
    late = q.enqueue("late", expires=0.2)
    time.sleep(0.4)
    q.resume()
    (task,) = take(client, "ctl-live", count=5)  # "warm" starts; "late" is found expired
    expect(page.locator("#wq-expired")).to_contain_text("Expired (1)")
    expect(page.locator("#wq-expired")).to_contain_text(late)
    _limited(client, task, 60, "q")
    expect(page.locator("#wq-limits")).to_contain_text("Held (RateLimited)")
