"""The queue page's limits section and its form (manage_limits, CSRF, audit log)."""

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine.registry import handler
from queues.models import AuditLog
from tests.engine_calls import finish
from tests.support.dashboard import make_user
from tests.support.limits import customer, noop, register, start

pytestmark = pytest.mark.django_db

handler("lim-mpart", partition=customer, rate=(10, 60), partition_concurrency=2, partition_rate=(2, 60))(noop)


def park_partitions(client):
    """lim-mpart with A parked by its concurrency (2 active, 4 listed) and B by its rate (1 listed)."""
    register(client, "lim-mpart", partition=customer, rate=(10, 60), partition_concurrency=2, partition_rate=(2, 60))
    q = Queue("lim-mpart")
    q.enqueue_many([f"A:{i}" for i in range(6)] + [f"B:{i}" for i in range(3)] + ["C:0"])
    got = start(client, "lim-mpart", 10).tasks
    assert sorted(t.payload for t in got) == ["A:0", "A:1", "B:0", "B:1", "C:0"]
    finish(client, next(t for t in got if t.payload == "B:0"))
    assert start(client, "lim-mpart", 10).tasks == []  # B back in the ring, then parked by its rate
    return q


def test_the_queue_page_shows_limits_and_their_use(db):
    """The limits section shows each limit in force and its use; the form only with manage_limits."""
    Queue("t1").enqueue("x")
    Queue("t1").set_limits(concurrency=3, rate="10/s")
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    page = web.get(reverse("queues:queue", args=["t1"])).content.decode()
    assert 'id="wq-limits"' in page and "0 / 3 active" in page and "10 per 1.0 s" in page
    assert "Change limits" not in page
    assert "Busiest partitions" not in page and "Held back in partitions" not in page
    web.force_login(make_user("op", perms=["view_dashboard", "manage_limits"]))
    assert "Change limits" in web.get(reverse("queues:queue", args=["t1"])).content.decode()


def test_the_queue_page_shows_partition_limits_and_their_use(db, client):
    """A partitioned queue with a rate: starts in the window, parked partitions, their tasks, the busiest."""
    park_partitions(client)
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    page = web.get(reverse("queues:queue", args=["lim-mpart"])).content.decode()
    assert "5 / 10 starts in the window" in page
    assert "2 partitions with tasks, 2 held back, 1 at their limit (most active: 2 / 2)" in page
    assert "1 waiting for their window" in page
    assert "Busiest partitions: A (2 active), C (1 active), B (1 active)" in page  # ties: in reverse name order
    assert '<td class="num">5</td></tr>' in page.split("Held back in partitions", 1)[1]


def test_the_form_sets_and_resets_limits_with_audit_rows(db):
    """Posting the form overrides the limits (blank: none); reset drops the overrides; each is audited."""
    Queue("t1").enqueue("x")
    web = Client(enforce_csrf_checks=False)
    web.force_login(make_user("op", perms=["view_dashboard", "manage_limits"]))
    url = reverse("queues:queue-limits", args=["t1"])
    r = web.post(url, {"concurrency": "2", "rate": "5,2", "partition_concurrency": "", "partition_rate": ""})
    assert r.status_code == 302
    limits = Queue("t1").limits()
    assert limits["concurrency"] == 2 and limits["rate"] == [5, 2.0]
    assert web.post(url, {"reset": "1"}).status_code == 302
    assert Queue("t1").limits()["overrides"] == {}
    rows = [(a.user.username, a.action, a.queue) for a in AuditLog.objects.order_by("id")]
    assert rows == [("op", "set_limits", "t1")] * 2
    assert web.post(url, {"concurrency": "0"}).status_code == 400
    assert web.post(url, {"rate": "lots"}).status_code == 400
    assert len(rows) == AuditLog.objects.count()


@pytest.mark.parametrize(
    "field,value",
    [
        ("concurrency", "²"),
        ("concurrency", "１２"),
        ("concurrency", "9" * 5000),
        ("partition_concurrency", "9" * 19),
        ("rate", "²/m"),
        ("rate", "9" * 5000 + "/m"),
        ("rate", "9" * 5000 + ",1"),
        ("partition_rate", "5,1²"),
        ("partition_rate", "5,1e999"),
    ],
)
def test_the_form_refuses_unicode_digits_and_huge_numbers_with_a_message(db, field, value):
    """A limit written with "²", full-width digits or 5,000 digits is a 400 naming the field, never a 500; ..."""
    # ... nothing changes and nothing is audited.
    Queue("t1").enqueue("x")
    web = Client(raise_request_exception=False)
    web.force_login(make_user("op", perms=["view_dashboard", "manage_limits"]))
    form = {"concurrency": "", "rate": "", "partition_concurrency": "", "partition_rate": "", field: value}
    r = web.post(reverse("queues:queue-limits", args=["t1"]), form, HTTP_ACCEPT="application/json")
    assert r.status_code == 400 and field.split("_")[-1] in r.json()["message"], r.content[:300]
    assert Queue("t1").limits()["overrides"] == {} and not AuditLog.objects.exists()


def test_the_form_needs_manage_limits_and_a_csrf_token(db):
    """Without manage_limits the post is refused; without the CSRF token too; nothing changes."""
    Queue("t1").enqueue("x")
    url = reverse("queues:queue-limits", args=["t1"])
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    assert web.post(url, {"concurrency": "2"}).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("op", perms=["view_dashboard", "manage_limits"]))
    assert strict.post(url, {"concurrency": "2"}).status_code == 403
    assert Queue("t1").limits()["overrides"] == {} and not AuditLog.objects.exists()


def test_metrics_show_limits_use_and_held_back(db, client):
    """/metrics has each limit in force, its use and the tasks held back, for limited queues only."""
    from queues.metrics import render

    q = Queue("lim-met")
    register(client, "lim-met", concurrency=1, rate=(10, 60))
    q.enqueue_many(["a", "b", "c"])
    start(client, "lim-met", 3)
    Queue("t1").enqueue("x")
    text = render(client).decode()
    assert 'worqr_queue_limit{limit="concurrency",queue="lim-met"} 1.0' in text
    assert 'worqr_queue_limit{limit="rate",queue="lim-met"} 10.0' in text
    assert 'worqr_queue_limit_window_seconds{limit="rate",queue="lim-met"} 60.0' in text
    assert 'worqr_queue_limit_use{limit="concurrency",queue="lim-met"} 1.0' in text
    assert 'worqr_queue_limit_use{limit="rate",queue="lim-met"} 1.0' in text
    assert 'worqr_queue_held_back{queue="lim-met"} 2.0' in text
    assert 'queue="t1"' not in "".join(line for line in text.splitlines() if "limit" in line or "held_back" in line)


def test_metrics_show_partition_limits_use_and_held_back(db, client):
    """/metrics counts the partitions parked by each partition limit and the tasks they hold back."""
    from queues.metrics import render

    park_partitions(client)
    text = render(client).decode()
    assert 'worqr_queue_limit{limit="partition_concurrency",queue="lim-mpart"} 2.0' in text
    assert 'worqr_queue_limit_use{limit="partition_concurrency",queue="lim-mpart"} 2.0' in text
    assert 'worqr_queue_partitions_held_back{limit="partition_concurrency",queue="lim-mpart"} 1.0' in text
    assert 'worqr_queue_partitions_held_back{limit="partition_rate",queue="lim-mpart"} 1.0' in text
    assert 'worqr_queue_partition_tasks_held_back{queue="lim-mpart"} 5.0' in text
    assert 'worqr_queue_held_back{queue="lim-mpart"} 0.0' in text  # the queue's own limits hold nothing back


def test_the_queues_command_shows_limits(db, client):
    """manage.py queues prints each limited queue's limits and use; --json has them under "limits"."""
    import io
    import json

    from django.core.management import call_command

    Queue("lim-cmd").enqueue_many(["a", "b"])
    register(client, "lim-cmd", concurrency=1)
    start(client, "lim-cmd", 2)
    out = io.StringIO()
    call_command("queues", stdout=out)
    assert "lim-cmd: concurrency 1/1 active, held back 1" in out.getvalue()
    out = io.StringIO()
    call_command("queues", "--json", stdout=out)
    (q,) = [q for q in json.loads(out.getvalue())["queues"] if q["name"] == "lim-cmd"]
    assert q["limits"]["concurrency"] == 1 and q["limits"]["held_back"] == 1
