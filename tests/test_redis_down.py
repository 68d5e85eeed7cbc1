"""Redis down, as a user meets it: the dashboard answers a 503 page that says so (the page's
script gets JSON), the same people are refused as when it is up, and a worker says it is waiting
for Redis and, stopped meanwhile, says nothing it cannot know."""

import signal
import time

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from queues import Queue
from tests.conftest import wait_for, wait_registered


@pytest.fixture
def web(client):
    """Django's test client (the ``client`` fixture of this project is the Redis client)."""
    from django.test import Client

    return Client()


@pytest.fixture
def operator(db):
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="queues", codename__in=["view_dashboard", "pause_queue"])
    )
    return user


@pytest.fixture
def redis_down(redis_server):
    """The test's redis-server stopped for the test's body, started again after."""
    redis_server.stop()
    yield
    redis_server.start()


def test_dashboard_pages_answer_503_saying_redis_is_down(web, operator, redis_server):
    """Every page a staff user opens while Redis is stopped is a 503 page that says Redis is unavailable."""
    task_id = Queue("t1").enqueue("x")
    web.force_login(operator)
    urls = [
        reverse("queues:overview"),
        reverse("queues:workers"),
        reverse("queues:schedules"),
        reverse("queues:queue", args=["t1"]),
        reverse("queues:task", args=[task_id]),
        reverse("queues:search") + "?q=state:failed",
    ]
    assert web.get(urls[0]).status_code == 200
    redis_server.stop()
    try:
        for url in urls:
            r = web.get(url)
            assert r.status_code == 503, (url, r.status_code)
            page = r.content.decode()
            assert "Redis is unavailable" in page and "cannot be reached" in page, url
            assert "Connection refused" in page or "Error" in page, url
            assert r["Retry-After"] == "5" and "no-store" in r["Cache-Control"]
        # The page's script (JSON) gets a JSON 503; the action wrote nothing, and could not.
        r = web.post(reverse("queues:queue-pause", args=["t1"]), HTTP_ACCEPT="application/json")
        assert r.status_code == 503 and r.json()["ok"] is False and "Redis" in r.json()["message"]
    finally:
        redis_server.start()
    assert web.get(urls[0]).status_code == 200
    assert Queue("t1").counts()["pending"] == 0  # flushed with the restart: nothing is half done


def test_redis_down_refuses_the_same_people(web, db, redis_down):
    """Redis down: anonymous users still get the login page, staff without the right 403."""
    url = reverse("queues:overview")
    r = web.get(url)
    assert r.status_code == 302 and "/admin/login/" in r["Location"]
    web.force_login(User.objects.create_user("nobody", password="pw", is_staff=True))
    assert web.get(url).status_code == 403


def test_worker_says_it_waits_for_redis_and_stops_without_claims(workers, client, redis_server):
    """Redis down: the worker says once that it waits, and on SIGTERM that it held no tasks."""
    w = workers(["t1"], name="waits")
    wait_registered(client, "waits")
    redis_server.stop()
    try:
        wait_for(
            lambda: "waiting for Redis" in w.output(),
            timeout=60,
            message=lambda: f"the worker to say it waits for Redis; its output:\n{w.output()[-3000:]}",
        )
        time.sleep(3)  # a few more rounds of retries: still one line
        w.signal(signal.SIGTERM)
        assert w.wait(60) == 0
    finally:
        redis_server.start()
    out = w.output()
    assert out.count("waiting for Redis") == 1, out
    assert out.count("control channel lost") <= 2, out  # the worker's channel and the schedules' changes
    assert out.count("fetch failed") <= 1, out
    assert "stopped without deregistering: Redis is out of reach" in out and "This worker held no tasks" in out, out
    assert "reaper" not in out, out


def test_a_worker_started_while_redis_is_down_says_once_that_it_waits_then_serves(workers, client, redis_server):
    """Redis down from the start: one line says the worker waits to register; once Redis is back it registers and runs tasks."""
    # (Also what a worker meets when Redis goes away between the steps of its registration.)
    redis_server.stop()
    try:
        w = workers(["t1"], name="waits-first")
        wait_for(
            lambda: "waiting for Redis" in w.output(),
            timeout=60,
            message=lambda: f"the worker to say it waits for Redis; its output:\n{w.output()[-3000:]}",
        )
        time.sleep(3)  # a few more tries: still one line
        assert w.output().count("waiting for Redis") == 1 and "cannot register" in w.output(), w.output()
    finally:
        redis_server.start()
    wait_for(lambda: "Redis is back: registered after" in w.output(), timeout=60, message=lambda: w.output()[-3000:])
    wait_registered(client, "waits-first")
    done = Queue("t1").counts()["completed"]
    Queue("t1").enqueue('{"sleep": 0}')
    wait_for(lambda: Queue("t1").counts()["completed"] == done + 1, timeout=30, message="the task to run")
    w.signal(signal.SIGTERM)
    assert w.wait(60) == 0
    assert w.output().count("waiting for Redis") == 1, w.output()


def test_worker_stopped_with_a_task_in_hand_says_it_runs_again(workers, client, redis_server):
    """SIGTERM with Redis down and a task running: the worker says that task runs again later."""
    Queue("t1").enqueue('{"sleep": 60}')
    w = workers(["t1"], name="holds", grace=0)
    wait_for(lambda: Queue("t1").counts()["active"] == 1, timeout=30, message="the task to start")
    redis_server.stop()
    try:
        wait_for(
            lambda: "waiting for Redis" in w.output(),
            timeout=60,
            message=lambda: f"the worker to say it waits for Redis; its output:\n{w.output()[-3000:]}",
        )
        w.signal(signal.SIGTERM)
        assert w.wait(180) == 0
    finally:
        redis_server.start()
    out = w.output()
    assert "1 task(s) of this worker could not be given back or acknowledged: they run again" in out, out
    assert out.count("worqr: stop failed") == 1, out  # one line for the call, not one per try
    assert "reaper" not in out, out
