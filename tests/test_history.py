"""History: hourly counters for 7 days, depth samples (capped), duration percentiles, and the
queue's history page drawn as SVG."""

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from queues.engine import commands, keys, readmodel, upkeep
from tests.engine_calls import take
from tests.support.dashboard import make_user


def _finish_one(client, queue):
    Queue(queue).enqueue("x")
    (task,) = take(client, queue)
    commands.finish(queue, "w", [(task.id, task.lease, "", False)], result_ttl=0).run(client)


def test_counters_per_minute_and_per_hour(client):
    """A finished task counts in its minute and its hour: 1 h, 24 h and 7 d all show it."""
    _finish_one(client, "h1")
    fields = {k.decode()[:1] for k in client.hkeys(keys.queue_key("h1", "throughput"))}
    assert fields == {"c", "C"}
    for span, n in (("1h", 60), ("24h", 96), ("7d", 168)):
        h = readmodel.history(client, "h1", span)
        assert len(h["completed"]) == n and sum(h["completed"]) == 1 and sum(h["failed"]) == 0, span
        assert len(h["depth"]) == n
    with pytest.raises(ValueError):
        readmodel.history(client, "h1", "2w")


def test_depth_is_sampled_once_a_minute_and_capped(client):
    """The first sample of a minute wins; samples a day (a week) old are dropped."""
    Queue("h2").enqueue_many(["a", "b"])
    upkeep.sample_depth(client, "h2")
    Queue("h2").enqueue("c")
    upkeep.sample_depth(client, "h2")  # same minute: not recorded again
    h = readmodel.history(client, "h2", "1h")
    assert h["depth"][-1] == 2
    key = keys.queue_key("h2", "depth")
    client.hset(key, mapping={f"m{i}": 1 for i in range(2000)})  # left behind by a gap
    now = readmodel.server_ms(client)
    upkeep.sweep_depth(client, "h2", now // 60000, now // 3600000)
    assert client.hlen(key) <= upkeep.DEPTH_MINUTES + upkeep.DEPTH_HOURS
    Queue("h2").drop()
    assert not client.exists(key)


def test_duration_percentiles_from_the_histogram(client):
    """Percentiles come from the histogram's buckets, within the bucket's bounds."""
    assert readmodel.duration_percentiles(client, "h3") is None
    for _ in range(4):
        _finish_one(client, "h3")
    p = readmodel.duration_percentiles(client, "h3")
    assert p["count"] == 4 and 0 <= p["p50"] <= p["p90"] <= p["p99"] <= 2.5  # quick runs, even on a busy machine
    client.hset(keys.queue_key("h3", "durations"), mapping={"le:0.005": 0, "le:0.01": 0, "le:1": 96, "le:5": 4})
    client.hset(keys.queue_key("h3", "durations"), "count", 100)
    p = readmodel.duration_percentiles(client, "h3")
    assert 0.5 < p["p50"] <= 1.0 and 0.5 < p["p90"] <= 1.0 and 2.5 < p["p99"] <= 5.0


@pytest.mark.django_db
def test_history_page_draws_svg_for_each_span(client):
    """The queue's history page shows throughput, failures, depth and percentiles as inline SVG."""
    _finish_one(client, "h4")
    upkeep.sample_depth(client, "h4")
    web = Client()
    web.force_login(make_user("viewer", perms=["view_dashboard"]))
    for span in ("1h", "24h", "7d"):
        page = web.get(reverse("queues:queue-history", args=["h4"]), {"span": span})
        html = page.content.decode()
        assert page.status_code == 200 and html.count("<svg") >= 2 and "p50" in html, span
    assert web.get(reverse("queues:queue-history", args=["h4"]), {"span": "1y"}).status_code == 400


def test_a_worker_samples_depth_with_its_heartbeat(client, workers):
    """A running worker records its queues' depth (the first beat samples at once)."""
    from tests.conftest import wait_for

    Queue("t4").enqueue_many(["x", "y"], delay=600)
    workers(["t4"], name="w-depth")
    h = wait_for(
        lambda: (h := readmodel.history(client, "t4", "1h"))["depth"][-1] is not None and h,
        20,
        message="a depth sample",
    )
    assert h["depth"][-1] == 2
