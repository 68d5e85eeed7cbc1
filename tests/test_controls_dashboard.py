"""The queue page shows the task controls: expired tasks (count and list) and a RateLimited hold
of the queue and of a partition, until when."""

import time

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from tests.engine_calls import take
from tests.test_controls import _limited
from tests.test_dashboard_views import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def web():
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    return web


def test_the_queue_page_lists_expired_tasks(web, client):
    """An expired task: its card counts 1 and its id is listed under Expired."""
    q = Queue("t1")
    q.pause()
    task_id = q.enqueue("x", expires=0.1, tags=["customer:7"])
    time.sleep(0.2)
    q.resume()
    take(client, "t1")
    html = web.get(reverse("queues:queue", args=["t1"])).content.decode()
    assert '<span class="wq-n">1</span><span>expired</span>' in html
    assert f"<code>{task_id}</code>" in html and "customer:7" in html


def test_the_queue_page_shows_a_hold_until_when(web, client):
    """A RateLimited hold of the queue shows as held until a time; none once reset."""
    q = Queue("t1")
    q.enqueue("x")
    (task,) = take(client, "t1")
    _limited(client, task, 60, "q")
    until = q.limits()["held_until"].isoformat(timespec="seconds")
    html = web.get(reverse("queues:queue", args=["t1"])).content.decode()
    assert "Held (RateLimited)" in html and f"nothing starts until {until} UTC" in html
    q.set_limits(reset=True)
    assert "Held (RateLimited)" not in web.get(reverse("queues:queue", args=["t1"])).content.decode()


def test_the_task_page_shows_its_controls(web):
    """A task's expiry and its throttle or debounce key are on its page."""
    q = Queue("t1")
    throttled = q.enqueue("a", throttle=("user-9", 60), expires=600)
    debounced = q.enqueue("b", debounce=("doc-3", 60))
    assert q.get(throttled).expires_at is not None and q.get(debounced).debounce_key == "doc-3"
    page = web.get(reverse("queues:task", args=[throttled])).content.decode()
    assert "Throttle key</th><td>user-9" in page and "Expires</th>" in page
    assert "Debounce key</th><td>doc-3" in web.get(reverse("queues:task", args=[debounced])).content.decode()
