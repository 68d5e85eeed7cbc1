"""``/metrics``: worqr's state in Prometheus' text format, read from Redis on each scrape.

``WorqrCollector`` reads the read model (never the task hashes) and yields, per queue (for at
most ``METRICS_QUEUES`` queues: those a live worker serves first, then the others by name; the
gauges ``worqr_queues`` and ``worqr_queues_exported`` say how many there are and how many
have their series here):

- gauges ``worqr_queue_pending`` (including tasks waiting for a lock), ``worqr_queue_delayed``,
  ``worqr_queue_active``, ``worqr_queue_failed`` (the failed set), ``worqr_queue_paused``,
  ``worqr_queue_workers`` (live workers serving it);
- counters ``worqr_tasks_enqueued_total``, ``worqr_tasks_completed_total``,
  ``worqr_tasks_failed_total`` (out of attempts), ``worqr_task_failures_total`` (failed
  attempts), ``worqr_tasks_retried_total``, ``worqr_tasks_cancelled_total``;
- the histogram ``worqr_task_duration_seconds`` (``queues.engine.durations``: every run of every
  task, timed by Redis from its start to its outcome in the ``finish``/``start`` and ``fail``
  scripts);

for queues with limits (README "Limits"), the gauges ``worqr_queue_limit`` (label ``limit``:
concurrency, rate, partition_concurrency, partition_rate: the number in force; a rate's starts
per window, its window in ``worqr_queue_limit_window_seconds``), ``worqr_queue_limit_use``
(``limit``: concurrency = active tasks, rate = starts in the window now, partition_concurrency =
the most active tasks of one partition), ``worqr_queue_held_back`` (runnable tasks the queue's
limits hold back now), ``worqr_queue_partitions_held_back`` (``limit``: partition_concurrency,
partition_rate: partitions parked by that limit now) and ``worqr_queue_partition_tasks_held_back``
(tasks listed in parked partitions; ``readmodel.limits`` counts at most 1,000 parked partitions
of each kind);

``worqr_workers_online``, and per schedule (labels ``schedule``, ``queue``): the counters
``worqr_schedule_runs_total`` (label ``kind``: tick, catchup, trigger) and
``worqr_schedule_skipped_total`` (label ``reason``: overlap, missed), the histogram
``worqr_schedule_lateness_seconds`` (due time to enqueue, for runs on time) and the gauges
``worqr_schedule_paused`` and ``worqr_schedule_next_run_timestamp_seconds``. Access: a staff user with ``queues.view_dashboard`` (superusers
have it), or ``Authorization: Bearer <token>`` of an API token with that permission.

The outbox (``queues.outbox``, tasks committed but not pushed to Redis yet): the gauges
``worqr_outbox_size`` and ``worqr_outbox_oldest_age_seconds`` (0 when empty), over the databases
the relay watches.
"""

import itertools

from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from . import outbox
from .api import auth
from .api.errors import Unauthorized
from .conf import get_connection
from .dashboard import access
from .engine import readmodel
from .engine import schedules as engine_schedules

VIEW_PERMISSION = "view_dashboard"
#: Queues whose own series a scrape gives at most: each has about 17, and Prometheus stores every
#: series it is given (and a scrape reads each queue's counts): queues made by the thousand (an
#: enqueue token's) must cost neither a series each nor a read each.
METRICS_QUEUES = 500

_GAUGES = (
    ("pending", "Tasks waiting to run now (including those waiting for a lock)."),
    ("delayed", "Tasks waiting for their due time (deferred, or retrying after a backoff)."),
    ("blocked", "Tasks waiting for their parents to complete (after=)."),
    ("active", "Tasks running on a worker."),
    ("failed", "Tasks out of attempts, kept in the failed set until retried or deleted."),
)
_COUNTERS = (
    ("tasks_enqueued", "enqueued", "Tasks enqueued."),
    ("tasks_completed", "completed", "Tasks completed."),
    ("tasks_failed", "total_failed", "Tasks that failed for good (out of attempts)."),
    ("task_failures", "failures", "Failed attempts, retried or not."),
    ("tasks_retried", "retried", "Failed attempts that were retried."),
    ("tasks_cancelled", "cancelled", "Tasks cancelled."),
    ("tasks_expired", "expired", "Tasks that expired before they started (expires=)."),
)


class WorqrCollector:
    """A prometheus_client collector reading worqr's read model at collect time."""

    def __init__(self, client):
        self.client = client

    def describe(self):
        return []  # unknown until Redis is read; keeps registration free of Redis calls

    def collect(self):
        known = readmodel.known_queues(self.client)
        workers = readmodel.workers(self.client)
        names = exported(known, workers)
        queues = [dict(c, name=n) for n, c in zip(names, readmodel.counts_of(self.client, names))]
        for state, doc in _GAUGES:
            family = GaugeMetricFamily(f"worqr_queue_{state}", doc, labels=["queue"])
            for q in queues:
                family.add_metric([q["name"]], q[state])
            yield family
        paused = GaugeMetricFamily("worqr_queue_paused", "1 if the queue is paused.", labels=["queue"])
        serving = GaugeMetricFamily("worqr_queue_workers", "Live workers serving the queue.", labels=["queue"])
        for q in queues:
            paused.add_metric([q["name"]], int(q["paused"]))
            serving.add_metric([q["name"]], sum(1 for w in workers if q["name"] in w.get("queues", ())))
        yield paused
        yield serving
        for name, field, doc in _COUNTERS:
            family = CounterMetricFamily(f"worqr_{name}", doc, labels=["queue"])
            for q in queues:
                family.add_metric([q["name"]], q[field])
            yield family
        histogram = HistogramMetricFamily(
            "worqr_task_duration_seconds", "How long task runs took, start to outcome (every task).", labels=["queue"]
        )
        for queue, (buckets, total) in readmodel.durations(self.client, names).items():
            histogram.add_metric([queue], buckets, total)
        yield histogram
        yield from limit_metrics(self.client, names)
        yield GaugeMetricFamily("worqr_workers_online", "Workers with a live heartbeat.", value=len(workers))
        yield GaugeMetricFamily("worqr_queues", "Queues there are (see worqr_queues_exported).", value=len(known))
        yield GaugeMetricFamily(
            "worqr_queues_exported",
            f"Queues whose own series are given here (at most {METRICS_QUEUES}: served ones first, then by name).",
            value=len(names),
        )
        yield from schedule_metrics(engine_schedules.all(self.client))
        yield from outbox_metrics(outbox.summary())


def exported(known, workers):
    """The queues (of the sorted ``known``) whose series a scrape gives: at most
    ``METRICS_QUEUES``, those a live worker serves first, then the others by name."""
    served = {q for w in workers for q in w.get("queues") or ()} & set(known)
    others = (q for q in known if q not in served)
    first = sorted(served)[:METRICS_QUEUES]
    return first + list(itertools.islice(others, METRICS_QUEUES - len(first)))


def outbox_metrics(summary):
    """The outbox's gauges (see the module doc)."""
    yield GaugeMetricFamily(
        "worqr_outbox_size", "Tasks committed but not in Redis yet (the relay pushes them).", value=summary["size"]
    )
    yield GaugeMetricFamily(
        "worqr_outbox_oldest_age_seconds",
        "Age of the oldest task in the outbox (0 when it is empty).",
        value=summary["oldest_age"] or 0.0,
    )


def limit_metrics(client, names):
    """The limits' metric families, for the queues that have limits (see the module doc)."""
    limited = readmodel.limited_queues(client, names)
    limit = GaugeMetricFamily("worqr_queue_limit", "A limit in force on the queue.", labels=["queue", "limit"])
    window = GaugeMetricFamily(
        "worqr_queue_limit_window_seconds", "The window of a rate in force.", labels=["queue", "limit"]
    )
    use = GaugeMetricFamily(
        "worqr_queue_limit_use",
        "A limit's current use: active tasks (concurrency), starts in the window (rate), "
        "the most active tasks of one partition (partition_concurrency).",
        labels=["queue", "limit"],
    )
    held = GaugeMetricFamily(
        "worqr_queue_held_back", "Runnable tasks the queue's limits hold back now.", labels=["queue"]
    )
    parked = GaugeMetricFamily(
        "worqr_queue_partitions_held_back", "Partitions a partition limit holds back now.", labels=["queue", "limit"]
    )
    parked_tasks = GaugeMetricFamily(
        "worqr_queue_partition_tasks_held_back",
        "Runnable tasks listed in partitions their limits hold back now.",
        labels=["queue"],
    )
    for name in limited:
        lim = readmodel.limits(client, name, busiest=0)
        for kind in ("concurrency", "partition_concurrency"):
            if lim[kind] is not None:
                limit.add_metric([name, kind], lim[kind])
        for kind in ("rate", "partition_rate"):
            if lim[kind] is not None:
                limit.add_metric([name, kind], lim[kind][0])
                window.add_metric([name, kind], lim[kind][1])
        if lim["concurrency"] is not None:
            use.add_metric([name, "concurrency"], lim["active"])
        if lim["rate"] is not None:
            use.add_metric([name, "rate"], lim["starts_in_window"])
        held.add_metric([name], lim["held_back"])
        parts = lim["partitions"]
        if lim["partition_concurrency"] is not None:
            use.add_metric([name, "partition_concurrency"], parts["most_active"])
            parked.add_metric([name, "partition_concurrency"], parts["at_concurrency"])
        if lim["partition_rate"] is not None:
            parked.add_metric([name, "partition_rate"], parts["rate_waiting"])
        if lim["partition_concurrency"] is not None or lim["partition_rate"] is not None:
            parked_tasks.add_metric([name], parts["held_back_tasks"])
    yield from (limit, window, use, held, parked, parked_tasks)


def schedule_metrics(schedules):
    """The schedules' metric families (see the module doc)."""
    labels = ["schedule", "queue"]
    runs = CounterMetricFamily("worqr_schedule_runs_total", "Runs enqueued by a schedule.", labels=[*labels, "kind"])
    skipped = CounterMetricFamily(
        "worqr_schedule_skipped_total", "Ticks of a schedule that enqueued no run.", labels=[*labels, "reason"]
    )
    lateness = HistogramMetricFamily(
        "worqr_schedule_lateness_seconds", "How late runs were enqueued after their tick (runs on time).", labels=labels
    )
    paused = GaugeMetricFamily("worqr_schedule_paused", "1 if the schedule is paused.", labels=labels)
    next_run = GaugeMetricFamily(
        "worqr_schedule_next_run_timestamp_seconds",
        "When the schedule runs next (Unix time; absent while paused or disabled).",
        labels=labels,
    )
    for s in schedules:
        at = [s.name, s.queue]
        for kind, n in (("tick", s.runs - s.catchups), ("catchup", s.catchups), ("trigger", s.triggered)):
            runs.add_metric([*at, kind], n)
        skipped.add_metric([*at, "overlap"], s.skipped)
        skipped.add_metric([*at, "missed"], s.missed_count)
        lateness.add_metric(at, s.lateness["buckets"], s.lateness["sum"])
        paused.add_metric(at, int(s.paused))
        if s.next_run is not None:
            next_run.add_metric(at, s.next_run.timestamp())
    yield from (runs, skipped, lateness, paused, next_run)


def render(client):
    """The exposition text of worqr's metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorqrCollector(client))
    return generate_latest(registry)


def refusal(request):
    """None if the request may read the metrics, else the status to answer: 401 without valid
    credentials, 403 when they lack ``queues.view_dashboard``. A bearer token is checked as the
    HTTP API checks it; a session as the dashboard does."""
    if "Authorization" in request.headers:
        try:
            token = auth.authenticate(request)
        except Unauthorized:
            return 401
        return None if VIEW_PERMISSION in auth.permissions_of(token) else 403
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return 401
    return None if access.can_view(user) else 403


@csrf_exempt  # it only reads: a POST is answered 405, not refused by the CSRF check
def metrics_view(request):
    """GET /metrics."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    status = refusal(request)
    if status is not None:
        response = HttpResponse(
            "authentication required\n" if status == 401 else "forbidden\n",
            status=status,
            content_type="text/plain",
        )
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="worqr metrics"'
        return response
    return HttpResponse(render(get_connection().client), content_type=CONTENT_TYPE_LATEST)
