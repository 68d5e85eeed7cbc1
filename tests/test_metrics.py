"""/metrics: Prometheus text made by prometheus_client from worqr's read model, for staff with
queues.view_dashboard or an API token with it; parsed back with prometheus_client's parser."""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from queues import Queue
from queues.backends.framework import TaskResultStatus
from queues.engine.codes import Code
from queues.models import ApiToken
from tests.conftest import wait_for
from tests.engine_calls import fail, finish, take
from tests.tasksapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def web():
    """Django's test client (``client`` is the Redis client in this test suite)."""
    return Client()


def view_permission():
    return Permission.objects.get(codename="view_dashboard", content_type__app_label="queues")


def parse(response):
    """{family name: family} and {(sample name, frozenset(labels)): value}."""
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    samples = {(s.name, frozenset(s.labels.items())): s.value for f in families.values() for s in f.samples}
    return families, samples


def q(name):
    return frozenset({("queue", name)})


def test_metrics_after_a_known_run(web, workers):
    """Three successes and one failure on dt-default, two pending and one delayed task on queues without ..."""
    # ... workers, one worker online: the scrape says exactly that, with the run durations.
    staff = User.objects.create_user("ops", password="pw", is_staff=True)
    staff.user_permissions.add(view_permission())
    results = [tasks.add.enqueue(i, i) for i in range(3)] + [tasks.fails.enqueue("boom")]
    Queue("mx-pending").enqueue_many(["a", "b"])
    Queue("mx-delayed").enqueue("c", delay=600)
    workers(["dt-default"])

    def all_finished():
        for r in results:
            r.refresh()
        return all(r.is_finished for r in results)

    wait_for(all_finished, 20, interval=0.05, message="the tasks to finish")
    assert [r.status for r in results].count(TaskResultStatus.SUCCESSFUL) == 3
    wait_for(lambda: Queue("dt-default").counts()["completed"] == 3, message="acknowledgements")

    assert web.login(username="ops", password="pw")
    response = web.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    families, samples = parse(response)
    assert families["worqr_queue_pending"].type == "gauge"
    assert families["worqr_tasks_completed"].type == "counter"
    assert families["worqr_task_duration_seconds"].type == "histogram"

    assert samples[("worqr_tasks_completed_total", q("dt-default"))] == 3
    assert samples[("worqr_tasks_failed_total", q("dt-default"))] == 1
    assert samples[("worqr_task_failures_total", q("dt-default"))] == 1
    assert samples[("worqr_tasks_enqueued_total", q("dt-default"))] == 4
    assert samples[("worqr_queue_failed", q("dt-default"))] == 1
    assert samples[("worqr_queue_active", q("dt-default"))] == 0
    assert samples[("worqr_queue_pending", q("mx-pending"))] == 2
    assert samples[("worqr_queue_delayed", q("mx-delayed"))] == 1
    assert samples[("worqr_queue_pending", q("mx-delayed"))] == 0
    assert samples[("worqr_queue_workers", q("dt-default"))] == 1
    assert samples[("worqr_queue_workers", q("mx-pending"))] == 0
    assert samples[("worqr_workers_online", frozenset())] == 1

    assert samples[("worqr_task_duration_seconds_count", q("dt-default"))] == 4
    assert samples[("worqr_task_duration_seconds_bucket", q("dt-default") | {("le", "+Inf")})] == 4
    assert 0 < samples[("worqr_task_duration_seconds_sum", q("dt-default"))] < 5
    buckets = [
        s.value
        for s in families["worqr_task_duration_seconds"].samples
        if s.name.endswith("_bucket") and s.labels["queue"] == "dt-default"
    ]
    assert buckets == sorted(buckets)  # cumulative
    assert ("worqr_task_duration_seconds_count", q("mx-pending")) not in samples  # nothing ran


def test_the_duration_histogram_counts_every_task_not_only_the_tasks_framework_s(web, client):
    """Runs of plain Queue tasks (one completed, one failed) are in worqr_task_duration_seconds."""
    staff = User.objects.create_user("ops", password="pw", is_staff=True)
    staff.user_permissions.add(view_permission())
    Queue("mx-plain").enqueue_many(["a", "b"])
    done, failing = take(client, "mx-plain", count=2)
    assert finish(client, done) == Code.COMPLETED and fail(client, failing) == Code.FAILED
    assert web.login(username="ops", password="pw")
    families, samples = parse(web.get("/metrics"))
    assert samples[("worqr_task_duration_seconds_count", q("mx-plain"))] == 2
    assert samples[("worqr_task_duration_seconds_bucket", q("mx-plain") | {("le", "+Inf")})] == 2
    assert "Tasks framework" not in families["worqr_task_duration_seconds"].documentation


def test_metrics_refused_to_anonymous_users(web):
    """No credentials: 401 with a Bearer challenge, and no metrics."""
    response = web.get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"worqr_" not in response.content


def test_metrics_refused_without_the_permission(web):
    """Logged in without queues.view_dashboard (or not staff): 403."""
    User.objects.create_user("plain", password="pw", is_staff=True)
    User.objects.create_user("outsider", password="pw").user_permissions.add(view_permission())
    for username in ("plain", "outsider"):
        web.login(username=username, password="pw")
        assert web.get("/metrics").status_code == 403
        web.logout()


def test_superuser_may_scrape(web):
    """Superusers have every permission."""
    User.objects.create_superuser("root", password="pw")
    web.login(username="root", password="pw")
    Queue("mx-root").enqueue("x")
    _, samples = parse(web.get("/metrics"))
    assert samples[("worqr_queue_pending", q("mx-root"))] == 1


def test_bearer_tokens(web):
    """A token with queues.view_dashboard may scrape; one without gets 403; an unknown or revoked one gets 401."""
    _, good = ApiToken.create("prometheus", permissions=[view_permission()])
    _, weak = ApiToken.create("weak")
    revoked, revoked_raw = ApiToken.create("old", permissions=[view_permission()])
    revoked.revoked = True
    revoked.save()
    Queue("mx-token").enqueue("x")

    response = web.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {good}")
    assert response.status_code == 200
    assert parse(response)[1][("worqr_queue_pending", q("mx-token"))] == 1
    assert ApiToken.objects.get(name="prometheus").last_used is not None
    assert web.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {weak}").status_code == 403
    for raw in (revoked_raw, "wq_nonsense", ""):
        assert web.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


def test_post_is_405_even_without_a_csrf_token():
    """/metrics only reads: a POST answers 405 with Allow (not the CSRF check's 403)."""
    resp = Client(enforce_csrf_checks=True).post("/metrics")
    assert resp.status_code == 405 and resp["Allow"] == "GET, HEAD"
