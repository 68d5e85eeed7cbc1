"""The same rights on every path of the dashboard: deleting a task that has not run needs
cancel_task (one task or in bulk), "all matching" needs the queue-wide action's permission, and
a bulk job re-checks its owner between batches (a real deactivation mid-job stops it) and stops
when asked to (its Stop button).

A job is held at a known point with Redis's own CLIENT PAUSE WRITE (its next batch waits; reads
go on), so "mid-job" is an event, not a guess about timing."""

import threading
import time

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import readmodel
from queues.models import AuditLog
from tests.conftest import wait_for
from tests.support.dashboard import ACTIONS, failed_tasks, make_user

pytestmark = pytest.mark.django_db(transaction=True)

JSON = {"HTTP_ACCEPT": "application/json"}


def bulk(web, action, **fields):
    return web.post(reverse("queues:bulk-start"), {"action": action, "confirm": "yes", **fields}, **JSON)


def job_of(web, url):
    return web.get(url, **JSON).json()


def wait_job(web, url, timeout=120):
    return wait_for(lambda: (j := job_of(web, url))["finished"] and j, timeout, message="the bulk action to end")


def while_held(client, change, done=None):
    """Run ``change`` in a thread while Redis holds every client's writes (the job's next batch;
    reads go on), until ``done()`` (or a moment, for a change that writes to Redis itself: it
    waits too); then let go. Returns what ``change`` returned."""
    out = []
    client.execute_command("CLIENT", "PAUSE", 120000, "WRITE")
    try:
        thread = threading.Thread(target=lambda: out.append(change()))
        thread.start()
        if done is not None:
            wait_for(done, 60, message="the change")
        else:
            time.sleep(0.5)
    finally:
        client.execute_command("CLIENT", "UNPAUSE")
    thread.join(60)
    return out[0]


def test_a_user_without_the_queue_wide_rights_cannot_bulk_act_on_all_matching(client):
    """Without purge_queue and retry_all_failed, "all matching" delete and retry are refused (403) and the search ..."""
    # ... page offers no "All matching"; without cancel_task, a delete of chosen tasks deletes only the failed ones.
    failed = failed_tasks(client, "br1", 5)  # first: it fails the first tasks of the queue
    pending = Queue("br1").enqueue_many(["x"] * 300)
    user = make_user("narrow", perms=["view_dashboard", "retry_task", "delete_task"])
    web = Client()
    web.force_login(user)
    refused = bulk(web, "delete", all="1", q="queue:br1")
    assert refused.status_code == 403 and "queues.purge_queue" in refused.json()["message"]
    refused = bulk(web, "retry", all="1", q="queue:br1 state:failed")
    assert refused.status_code == 403 and "queues.retry_all_failed" in refused.json()["message"]
    page = web.get(reverse("queues:search"), {"q": "queue:br1"}).content.decode()
    assert 'name="all"' not in page and 'data-bulk="delete"' in page
    chosen = bulk(web, "delete", ids=[*pending[:5], *failed])
    assert chosen.status_code == 202
    job = wait_job(web, chosen.json()["url"])
    assert (job["phase"], job["changed"], job["total"], job["finished_only"]) == ("done", 5, 10, True)
    assert Queue("br1").counts()["pending"] == 300 and all(readmodel.task(client, i) is None for i in failed)
    (row,) = AuditLog.objects.filter(action="bulk_delete")
    assert "failed and completed ones only" in row.detail and "5 of 10 deleted" in row.detail


def test_all_matching_with_the_queue_wide_right_but_no_cancel_task_leaves_tasks_that_have_not_run(client):
    """With purge_queue and delete_task but not cancel_task, deleting all matching deletes the failed tasks only."""
    failed = failed_tasks(client, "br2", 4)
    pending = Queue("br2").enqueue_many(["x"] * 50)
    web = Client()
    web.force_login(make_user("purger", perms=["view_dashboard", "delete_task", "purge_queue"]))
    job = wait_job(web, bulk(web, "delete", all="1", q="queue:br2").json()["url"])
    assert (job["phase"], job["changed"], job["total"]) == ("done", 4, 54)
    assert all(readmodel.task(client, i) for i in pending) and not any(readmodel.task(client, i) for i in failed)


def test_deleting_one_task_that_has_not_run_needs_cancel_task(client):
    """The dashboard's Delete of a pending task needs cancel_task as well (403, the task stays, no Delete ..."""
    # ... button on its page); a failed task is deleted with delete_task alone.
    (failed,) = failed_tasks(client, "br3", 1)
    tid = Queue("br3").enqueue("x")
    web = Client()
    web.force_login(make_user("deleter", perms=["view_dashboard", "delete_task"]))
    delete_url = reverse("queues:task-delete", args=[tid])
    assert delete_url not in web.get(reverse("queues:task", args=[tid])).content.decode()
    r = web.post(reverse("queues:task-delete", args=[tid]), {"confirm": "yes"}, **JSON)
    assert r.status_code == 403 and "queues.cancel_task" in r.json()["message"]
    assert readmodel.task(client, tid).state == "pending" and not AuditLog.objects.exists()
    assert (
        reverse("queues:task-delete", args=[failed]) in web.get(reverse("queues:task", args=[failed])).content.decode()
    )
    assert web.post(reverse("queues:task-delete", args=[failed]), {"confirm": "yes"}, **JSON).status_code == 200
    assert readmodel.task(client, failed) is None
    both = Client()
    both.force_login(make_user("remover", perms=["view_dashboard", "delete_task", "cancel_task"]))
    assert both.post(reverse("queues:task-delete", args=[tid]), {"confirm": "yes"}, **JSON).status_code == 200
    assert readmodel.task(client, tid) is None


def _started(web, client, queue, n):
    """A bulk delete of ``n`` delayed tasks, held by Redis right after its first batch."""
    Queue(queue).enqueue_many(["x"] * n, delay=3600)
    url = bulk(web, "delete", all="1", q=f"queue:{queue} state:delayed").json()["url"]
    wait_for(lambda: (job_of(web, url).get("changed") or 0) > 0, 120, message="the first batch")
    return url


def test_a_bulk_job_stops_between_batches_when_its_owner_is_deactivated(client):
    """A user deactivated while their bulk delete of 60,000 tasks runs: the job stops before its next batch, ..."""
    # ... says why, keeps the rest, and the audit row says how far it went.
    n = 60_000
    owner = make_user("owner", perms=["view_dashboard", *ACTIONS])
    web = Client()
    web.force_login(owner)
    url = _started(web, client, "br4", n)
    web.force_login(make_user("watcher", perms=["view_dashboard"]))  # the owner will not see the page any more

    def deactivate():  # as the admin's change form does: save(), which also tells open sockets
        owner.is_active = False
        owner.save()

    while_held(client, deactivate, done=lambda: not User.objects.get(pk=owner.pk).is_active)
    job = wait_job(web, url)
    assert job["phase"] == "stopped" and job["reason"] == "stopped: owner is deactivated", job
    assert 0 < job["changed"] <= n - 10_000, job
    assert Queue("br4").counts()["delayed"] == n - job["changed"]
    (row,) = AuditLog.objects.filter(action="bulk_delete")
    assert f"stopped: owner is deactivated, after {job['changed']} of {n} deleted" in row.detail


def test_a_removed_permission_stops_a_running_bulk_job_too(client):
    """Losing purge_queue (the right "all matching" delete needs) mid-job stops the job the same way."""
    owner = make_user("owner2", perms=["view_dashboard", *ACTIONS])
    web = Client()
    web.force_login(owner)
    url = _started(web, client, "br5", 40_000)
    while_held(
        client,
        lambda: owner.user_permissions.remove(*owner.user_permissions.filter(codename="purge_queue")),
        done=lambda: not User.objects.filter(pk=owner.pk, user_permissions__codename="purge_queue").exists(),
    )
    job = wait_job(web, url)
    assert (job["phase"], job["reason"]) == ("stopped", "stopped: owner2 lacks queues.purge_queue"), job
    assert Queue("br5").counts()["delayed"] == 40_000 - job["changed"] > 0


def test_the_stop_button_stops_a_bulk_job_and_only_its_owner_or_a_peer_may_press_it(client):
    """POST …/stop/ from the job's page: a viewer is refused (403), the owner stops it before its next batch; ..."""
    # ... the page shows the Stop button while it runs, and no longer once it ended.
    n = 40_000
    owner = make_user("owner3", perms=["view_dashboard", *ACTIONS])
    web, viewer = Client(), Client()
    web.force_login(owner)
    viewer.force_login(make_user("looker", perms=["view_dashboard"]))
    url = _started(web, client, "br6", n)
    job_id = url.rstrip("/").rsplit("/", 1)[1]
    stop = reverse("queues:bulk-stop", args=[job_id])
    assert 'id="wq-job-stop"' in web.get(url).content.decode()
    assert 'id="wq-job-stop"' not in viewer.get(url).content.decode()
    assert viewer.post(stop, **JSON).status_code == 403
    held = job_of(web, url)["changed"]
    answer = while_held(client, lambda: web.post(stop, **JSON))
    assert answer.status_code == 200 and answer.json()["ok"], answer.content
    job = wait_job(web, url)
    assert (job["phase"], job["reason"]) == ("stopped", "stopped by owner3"), job
    assert held <= job["changed"] < n and Queue("br6").counts()["delayed"] == n - job["changed"]
    assert 'id="wq-job-stop"' not in web.get(url).content.decode()
    assert "This bulk action had already ended." in web.post(stop, **JSON).json()["message"]
