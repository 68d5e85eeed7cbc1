"""Telling a worker from the dashboard to go quiet (take no more tasks, finish those running) or
to stop (as SIGTERM: finish, then exit 0), with real worker processes; the rights and the audit."""

import json
import time

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import readmodel
from queues.models import AuditLog
from tests.conftest import records, wait_for, wait_registered
from tests.support.dashboard import make_user

pytestmark = pytest.mark.django_db(transaction=True)

JSON = {"HTTP_ACCEPT": "application/json"}


def _controller():
    web = Client()
    web.force_login(make_user("controller", perms=["view_dashboard", "control_workers"]))
    return web


def test_quiet_worker_finishes_its_task_and_takes_no_more(client, workers):
    """Quiet: the running task ends as usual, the next one stays pending; the worker page says "quiet"."""
    q = Queue("t5")
    w = workers(["t5"], name="quiet-w")
    wait_registered(client, "quiet-w")
    first = q.enqueue(json.dumps({"sleep": 2}))
    wait_for(lambda: q.counts()["active"] == 1, 15, message="the first task to start")
    web = _controller()
    assert reverse("queues:worker-quiet", args=["quiet-w"]) in web.get(reverse("queues:workers")).content.decode()
    r = web.post(reverse("queues:worker-quiet", args=["quiet-w"]), {"next": "/queues/workers/quiet-w/"})
    assert r.status_code == 302
    entry = AuditLog.objects.get()
    assert (entry.action, entry.detail, entry.user.username) == ("worker_quiet", "worker quiet-w", "controller")
    wait_for(lambda: readmodel.worker(client, "quiet-w")["quiet"], 15, message="the heartbeat to say quiet")
    page = web.get(reverse("queues:worker", args=["quiet-w"])).content.decode()
    assert "quiet: takes no more tasks" in page
    assert "quiet" in web.get(reverse("queues:workers")).content.decode()
    second = q.enqueue(json.dumps({"sleep": 0}))
    wait_for(lambda: [r["id"] for r in records(client, "t5")] == [first], 30, message="the running task to finish")
    time.sleep(1.5)  # a worker taking tasks would have taken the second by now (its slot is free)
    assert [r["id"] for r in records(client, "t5")] == [first]
    assert q.get(second).state == "pending" and w.proc.poll() is None


def test_stop_lets_the_running_task_finish_then_exits_zero(client, workers):
    """Stop: the worker finishes its running task (not given back) and exits with status 0."""
    q = Queue("t6")
    w = workers(["t6"], name="stop-w", grace=30)
    wait_registered(client, "stop-w")
    running = q.enqueue(json.dumps({"sleep": 2}))
    wait_for(lambda: q.counts()["active"] == 1, 15, message="the task to start")
    r = _controller().post(reverse("queues:worker-stop", args=["stop-w"]), **JSON)
    assert r.status_code == 200 and r.json()["ok"], r.content
    assert w.wait(60) == 0
    assert [(r["id"], r["outcome"]) for r in records(client, "t6")] == [(running, "ok")]
    assert q.get(running) is None or q.get(running).state == "completed"
    assert AuditLog.objects.get().action == "worker_stop"


def test_worker_orders_need_the_right_and_csrf(client, workers):
    """A viewer sees no Quiet/Stop and is refused (403); a post without CSRF is refused; nothing is sent."""
    workers(["t4"], name="kept-w")
    wait_registered(client, "kept-w")
    viewer = Client()
    viewer.force_login(make_user("viewer", perms=["view_dashboard"]))
    quiet = reverse("queues:worker-quiet", args=["kept-w"])
    assert quiet not in viewer.get(reverse("queues:worker", args=["kept-w"])).content.decode()
    assert quiet not in viewer.get(reverse("queues:workers")).content.decode()
    for url in (quiet, reverse("queues:worker-stop", args=["kept-w"])):
        assert viewer.post(url).status_code == 403
        assert viewer.post(url, **JSON).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("csrf-less", perms=["view_dashboard", "control_workers"]))
    assert strict.post(quiet).status_code == 403
    assert _controller().post(reverse("queues:worker-quiet", args=["no-such-w"]), **JSON).status_code == 404
    time.sleep(0.5)
    assert not readmodel.worker(client, "kept-w")["quiet"] and not AuditLog.objects.exists()


def test_a_worker_gone_quiet_tells_its_queues_dashboards(client, workers):
    """The beat that records quiet publishes worker_quiet once on each of its queues: its pages refresh without a reload."""
    # Going quiet is no transition of a queue, and the pages that show a worker refresh on its
    # queues' events.
    from queues.engine import keys, orders

    w = workers(["t5", "t6"], name="quiet-tell")
    wait_registered(client, "quiet-tell")
    sub = client.pubsub()
    sub.subscribe(keys.queue_events_channel("t5"), keys.queue_events_channel("t6"))
    wait_for(lambda: sub.get_message(timeout=0.1) is None and sub.subscribed, 10, message="the subscription")
    orders.tell_worker(client, "quiet-tell", "quiet")
    heard = []

    def told():
        m = sub.get_message(timeout=0.2)
        if m and m["type"] == "message":
            event = json.loads(m["data"])
            if event["e"] == "worker_quiet":
                heard.append((m["channel"].decode(), event))
        return len(heard) >= 2

    wait_for(told, 15, message=lambda: f"a worker_quiet event on both queues (heard {heard})")
    assert sorted((c, e["q"], e["w"]) for c, e in heard) == [
        (keys.queue_events_channel("t5"), "t5", "quiet-tell"),
        (keys.queue_events_channel("t6"), "t6", "quiet-tell"),
    ]
    assert readmodel.worker(client, "quiet-tell")["quiet"]  # the record said quiet before the event
    time.sleep(2.5)  # two more beats: told once, not at every beat
    later = [json.loads(m["data"]) for m in iter(lambda: sub.get_message(timeout=0.1), None) if m["type"] == "message"]
    assert not [e for e in later if e["e"] == "worker_quiet"], later
    sub.close()
    assert w.proc.poll() is None
