"""The search page and bulk actions: qualifiers, the bounded step and its cursor, permissions,
CSRF, confirmation, one audit row per bulk action, 100,000 tasks in the background while
other requests go on, and at most 2 bulk jobs running per process, 1 per user (more: 429)."""

import re
import threading
import time

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import readmodel, upkeep
from queues.models import AuditLog
from tests.conftest import wait_for
from tests.support.dashboard import ACTIONS, failed_tasks, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator(db):
    return make_user("operator", perms=["view_dashboard", *ACTIONS])


@pytest.fixture
def web():
    return Client()


def wait_job(web, url, timeout=60):
    return wait_for(
        lambda: (j := web.get(url, HTTP_ACCEPT="application/json").json())["finished"] and j,
        timeout,
        message="the bulk action to end",
    )


def test_search_page_finds_by_tag_and_text_and_goes_further(client, web, operator, settings):
    """The box's search finds by tag and free text; a step is bounded and "Search further" goes on; a bad ..."""
    # ... query or cursor (one past Redis's range too) is a 400 saying so.
    settings.WORQR = {**settings.WORQR, "SEARCH_SCAN_LIMIT": 100}
    q = Queue("ds1")
    q.enqueue_many([f"noise {i}" for i in range(150)])
    needle = q.enqueue('{"to": "needle@example.com"}', tags=["customer:42"])
    web.force_login(operator)
    page = web.get(reverse("queues:search"), {"q": "tag:customer:42"})
    assert page.status_code == 200 and needle in page.content.decode()
    assert 'role="search"' in page.content.decode()
    first = web.get(reverse("queues:search"), {"q": "queue:ds1 needle"}).content.decode()
    assert needle not in first and "Search further" in first
    link = re.search(r'id="wq-further" href="([^"]+)"', first).group(1).replace("&amp;", "&")
    further = web.get(reverse("queues:search") + link).content.decode()
    assert needle in further
    assert web.get(reverse("queues:search"), {"q": needle}).status_code == 302  # an id: its page
    bad = web.get(reverse("queues:search"), {"q": "state:sleeping"})
    assert bad.status_code == 400 and "state" in bad.content.decode()
    huge = web.get(reverse("queues:search"), {"q": "needle", "cursor": "0.9223372036854775807"})
    assert huge.status_code == 400 and "is not a search cursor" in huge.content.decode()


def test_bulk_retry_of_chosen_tasks_is_audited_once(client, web, operator):
    """Retrying chosen failed tasks: one audit row with its count, the tasks back to pending."""

    ids = failed_tasks(client, "ds2", 3)
    web.force_login(operator)
    resp = web.post(
        reverse("queues:bulk-start"),
        {"action": "retry", "confirm": "yes", "ids": ids[:2]},
        HTTP_ACCEPT="application/json",
    )
    assert resp.status_code == 202, resp.content
    job = wait_job(web, resp.json()["url"])
    assert (job["phase"], job["changed"], job["total"]) == ("done", 2, 2)
    assert [readmodel.task(client, i).state for i in ids] == ["pending", "pending", "failed"]
    rows = list(AuditLog.objects.filter(action="bulk_retry"))
    assert len(rows) == 1 and "2 of 2 queued again" in rows[0].detail and rows[0].user == operator


def test_bulk_needs_confirmation_permission_and_csrf(client, operator):
    """No confirmation: 400; no permission: 403; no CSRF token: 403; nothing changes."""
    tid = Queue("ds3").enqueue("x", delay=60)
    viewer = make_user("viewer", perms=["view_dashboard"])
    web = Client()
    web.force_login(operator)
    assert web.post(reverse("queues:bulk-start"), {"action": "delete", "ids": [tid]}).status_code == 400
    assert web.post(reverse("queues:bulk-start"), {"action": "nuke", "ids": [tid], "confirm": "yes"}).status_code == 400
    web.force_login(viewer)
    assert (
        web.post(reverse("queues:bulk-start"), {"action": "delete", "ids": [tid], "confirm": "yes"}).status_code == 403
    )
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    assert (
        strict.post(reverse("queues:bulk-start"), {"action": "delete", "ids": [tid], "confirm": "yes"}).status_code
        == 403
    )
    assert readmodel.task(client, tid) is not None and not AuditLog.objects.exists()


def test_bulk_on_100000_matching_tasks_runs_in_the_background(client, web, operator):
    """Deleting all 100,000 tasks a search finds runs in batches while other pages still answer fast."""
    n = 100_000
    q = Queue("ds4")
    q.enqueue_many(["x"] * n, delay=3600)
    web.force_login(operator)
    resp = web.post(
        reverse("queues:bulk-start"),
        {"action": "delete", "confirm": "yes", "all": "1", "q": "queue:ds4 state:delayed"},
        HTTP_ACCEPT="application/json",
    )
    assert resp.status_code == 202
    url, slowest, served = resp.json()["url"], 0.0, 0
    while not (job := web.get(url, HTTP_ACCEPT="application/json").json())["finished"]:
        began = time.monotonic()
        assert web.get(reverse("queues:queue", args=["ds4"])).status_code == 200
        slowest = max(slowest, time.monotonic() - began)
        served += 1
    assert (job["phase"], job["changed"]) == ("done", n), job
    assert q.counts()["delayed"] == 0
    assert served >= 2, "no page was served while the bulk action ran"
    assert slowest < 5.0, f"a page took {slowest:.2f} s during the bulk action"  # (a busy shared machine)
    (row,) = AuditLog.objects.filter(action="bulk_delete")
    assert f"{n} of {n} deleted" in row.detail


@pytest.fixture
def held_finding(monkeypatch):
    """Bulk jobs that find their tasks only once ``gate`` is set (then as they would: the real
    search); set on the way out, whatever happened, so no job outlives the test."""
    from queues.engine import bulk as engine_bulk

    real, gate = engine_bulk.find_ids, threading.Event()

    def find_ids(*args, **kwargs):
        assert gate.wait(60), "the test never let the job go on"
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_bulk, "find_ids", find_ids)
    try:
        yield gate
    finally:
        gate.set()


def bulk_threads():
    return [t for t in threading.enumerate() if t.name.startswith("worqr-bulk-")]


def run_again_all(web, accept_json=True):
    fields = {"action": "again", "confirm": "yes", "all": "1", "q": "queue:bq"}
    return web.post(
        reverse("queues:bulk-start"), fields, **({"HTTP_ACCEPT": "application/json"} if accept_json else {})
    )


def test_bulk_jobs_are_capped_at_two_per_process_and_one_per_user(client, held_finding):
    """With two bulk jobs running, a user's second job and a third user's are refused with 429 and why, starting ..."""
    # ... no thread and writing no audit row; once they end, a new one is accepted.
    Queue("bq").enqueue_many(["x"] * 3)
    webs = {}
    for name in ("one", "two", "three"):
        webs[name] = Client()
        webs[name].force_login(make_user(f"bulk-{name}", perms=["view_dashboard", "enqueue_task"]))
    before = len(bulk_threads())
    first, second = run_again_all(webs["one"]), run_again_all(webs["two"])
    assert first.status_code == second.status_code == 202, (first.content, second.content)
    mine = run_again_all(webs["one"])
    assert mine.status_code == 429 and mine.json() == {
        "ok": False,
        "message": "You already have a bulk action running: wait for it to end (or stop it) before starting another.",
    }
    full = run_again_all(webs["three"])
    assert full.status_code == 429 and not full.json()["ok"]
    assert "running 2 bulk actions already: try again once one of them has ended" in full.json()["message"]
    chosen = webs["three"].post(
        reverse("queues:bulk-start"),
        {"action": "again", "confirm": "yes", "ids": [f"bq-{0:016x}"]},
        HTTP_ACCEPT="application/json",
    )
    assert chosen.status_code == 429  # chosen tasks take a turn too
    page = run_again_all(webs["three"], accept_json=False)  # the form posted without the page's script
    assert page.status_code == 429 and "running 2 bulk actions already" in page.content.decode()
    assert len(bulk_threads()) == before + 2 and AuditLog.objects.filter(action="bulk_again").count() == 2
    held_finding.set()
    for web, answer in ((webs["one"], first), (webs["two"], second)):
        assert wait_job(web, answer.json()["url"])["phase"] == "done"
    later = run_again_all(webs["three"])
    assert later.status_code == 202, later.content
    assert wait_job(webs["three"], later.json()["url"])["phase"] == "done"


def test_a_bulk_job_that_fails_frees_its_turn(client, held_finding, monkeypatch):
    """A job that ends with an error frees its user's turn: refused while it runs, a new job is accepted once it failed."""
    from queues.engine import bulk as engine_bulk

    held = engine_bulk.find_ids

    def failing(*args, **kwargs):
        held(*args, **kwargs)
        raise RuntimeError("Redis went away")

    monkeypatch.setattr(engine_bulk, "find_ids", failing)
    Queue("bq").enqueue("x")
    web = Client()
    web.force_login(make_user("bulk-failing", perms=["view_dashboard", "enqueue_task"]))
    first = run_again_all(web)
    assert first.status_code == 202
    assert run_again_all(web).status_code == 429
    held_finding.set()
    job = wait_job(web, first.json()["url"])
    assert (job["phase"], job["error"]) == ("failed", "Redis went away")
    monkeypatch.setattr(engine_bulk, "find_ids", held)
    again = run_again_all(web)
    assert again.status_code == 202, again.content
    assert wait_job(web, again.json()["url"])["phase"] == "done"


def test_worker_page_shows_its_tasks_progress_and_the_gone(client, web, operator, workers):
    """A worker's page lists its task in process with progress; the workers page lists the gone."""
    import json

    from queues.engine import keys

    w = workers(["prog"], name="w-page")
    tid = Queue("prog").enqueue(json.dumps({"steps": 2, "gate": True}))
    wait_for(lambda: (t := readmodel.task(client, tid)) and t.state == "active", 30, message="the task to start")
    client.rpush(f"test:gate:{tid}", 1)
    wait_for(lambda: readmodel.task(client, tid).progress_value == 0.5, 15, message="progress")
    web.force_login(operator)
    page = web.get(reverse("queues:worker", args=["w-page"])).content.decode()
    assert tid in page and 'value="50.0"' in page and "did 1 of 2" in page and " MB" in page
    task_page = web.get(reverse("queues:task", args=[tid])).content.decode()
    assert "step 1 of 2" in task_page and 'id="wq-task-progress"' in task_page
    client.rpush(f"test:gate:{tid}", 1)
    w.kill()
    upkeep.remember_gone(client, {"name": "w-old", "how": "stopped", "host": "h", "queues": ["prog"]})
    listing = web.get(reverse("queues:workers")).content.decode()
    assert 'data-gone="w-old"' in listing
    assert "stopped" in web.get(reverse("queues:worker", args=["w-old"])).content.decode()
    assert web.get(reverse("queues:worker", args=["nobody"])).status_code == 404
    assert web.get(reverse("queues:worker", args=["bad name"])).status_code == 400
    assert keys.GONE_WORKERS_MAX == 100
