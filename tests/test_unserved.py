"""Tasks sent to a queue no worker has ever served: the producer's process logs one warning per
queue (a misspelt name is otherwise silent for ever), and the dashboard marks the queue."""

import logging
import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import unserved
from tests.conftest import wait_for

WARNING = "no worker has ever served this queue"


@pytest.fixture(autouse=True)
def _fresh():
    """Each test is a new story for the process's answers (the session's Redis is flushed per test)."""
    unserved.forget()
    yield
    unserved.forget()


def warnings_about(caplog, queue):
    return [
        r
        for r in caplog.records
        if r.name == "worqr" and WARNING in r.getMessage() and f"queue {queue}:" in r.getMessage()
    ]


def test_one_warning_per_queue_and_process(caplog):
    """Ten enqueues to a queue nobody serves warn once, naming it; another such queue warns too."""
    caplog.set_level(logging.WARNING, logger="worqr")
    q = Queue("emials")
    for i in range(5):
        q.enqueue(f"x{i}")
    q.enqueue_many(["a", "b", "c"])
    q.enqueue("d", delay=30)
    q.enqueue("e", retries=2)
    (warning,) = warnings_about(caplog, "emials")
    assert warning.levelname == "WARNING"
    assert "manage.py worker emials" in warning.getMessage() and "misspelt" in warning.getMessage()
    Queue("other").enqueue("x")
    assert len(warnings_about(caplog, "other")) == 1
    assert len(warnings_about(caplog, "emials")) == 1


def test_a_served_queue_is_not_warned_about_and_not_marked(caplog, client, workers, db):
    """A queue a worker once served is not warned about; the dashboard marks only the unserved one."""
    caplog.set_level(logging.WARNING, logger="worqr")
    w = workers(["t2"], name="serves-t2")
    wait_for(lambda: Queue("t2").counts()["served"], timeout=30, message="the worker to register for t2")
    w.close()  # gone: the queue was served all the same
    Queue("t2").enqueue("x")
    Queue("lonely").enqueue("x")
    assert warnings_about(caplog, "t2") == []
    assert len(warnings_about(caplog, "lonely")) == 1

    web = Client()
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="queues", codename="view_dashboard"))
    web.force_login(user)
    page = web.get(reverse("queues:overview")).content.decode()
    rows = {name: row for name, row in _rows(page)}
    assert "no worker has served this queue" in rows["lonely"]
    assert "no worker has served this queue" not in rows["t2"]
    lonely = web.get(reverse("queues:queue", args=["lonely"])).content.decode()
    assert "no worker has served this queue" in lonely and "manage.py worker lonely" in lonely
    assert "no worker has served this queue" not in web.get(reverse("queues:queue", args=["t2"])).content.decode()


def _rows(page):
    for m in re.finditer(r'<tr data-queue="([^"]+)">(.*?)</tr>', page, re.S):
        yield m.group(1), m.group(2)
