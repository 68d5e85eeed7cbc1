"""Charts: run and wait time percentiles over time (the ``timings`` histograms the finish path
keeps), the SVG they are drawn as, and the batch graph."""

import pytest

from queues import Queue, mark_deploy
from queues.dashboard import charts, graphs
from queues.engine import commands, durations, keys, readmodel
from tests.engine_calls import fail, take


def _finish(client, queue, n=1, failed=False):
    Queue(queue).enqueue_many(["x"] * n)
    tasks = take(client, queue, count=n)
    if failed:
        for t in tasks:
            fail(client, t)
    else:
        commands.finish(queue, "w", [(t.id, t.lease, "", False) for t in tasks], result_ttl=0).run(client)


def test_a_finished_task_counts_its_run_and_wait_at_every_span(client):
    """Finishes add runs and waits to their minute; 1 h, 24 h and 7 d all show them (the newest minute added to its quarter and hour)."""
    _finish(client, "tm1", 3)
    fields = {k.decode() for k in client.hkeys(keys.queue_key("tm1", "timings"))}
    assert "@m" in fields and {f[0] for f in fields} == {"@", "m"}  # one minute written, nothing rolled up yet
    assert any(":r" in f for f in fields) and any(":w" in f for f in fields)
    for span, n in (("1h", 60), ("24h", 96), ("7d", 168)):
        t = readmodel.timings(client, "tm1", span)
        assert len(t["run"]["p50"]) == n and sum(t["run"]["count"]) == 3 and sum(t["wait"]["count"]) == 3, span
        assert t["run"]["p50"][-1] is not None and t["run"]["p50"][0] is None
    Queue("tm1").drop()
    assert not client.exists(keys.queue_key("tm1", "timings"))


def test_a_new_minute_rolls_the_last_one_up_into_its_quarter_and_hour(client):
    """The first write of a minute adds the previous minute to its quarter hour and hour, once."""
    key = keys.queue_key("tm0", "timings")
    now = readmodel.server_ms(client)
    prev = now // 60000 - 1
    client.hset(key, mapping={"@m": prev, f"m{prev}:r3": 7, f"m{prev}:w1": 2})
    _finish(client, "tm0", 2)
    _finish(client, "tm0", 1)  # same minute: nothing rolled again
    got = {k.decode(): int(v) for k, v in client.hgetall(key).items() if not k.startswith(b"@")}
    assert got[f"q{prev // 15}:r3"] == 7 and got[f"h{prev // 60}:r3"] == 7 and got[f"h{prev // 60}:w1"] == 2
    assert int(client.hget(key, "@m")) == prev + 1
    for span in ("24h", "7d"):
        t = readmodel.timings(client, "tm0", span)
        assert sum(t["run"]["count"]) == 7 + 3 and sum(t["wait"]["count"]) == 2 + 3, span


def test_wait_time_counts_from_the_due_time_of_a_delayed_task(client):
    """A task due in the past waits from its due time, not from its enqueue: a 2 s old due time shows a wait of about 2 s."""
    q = Queue("tm2")
    q.enqueue("x", delay=3600)
    now = readmodel.server_ms(client)
    (tid,) = [t.decode() for t in client.zrange(keys.queue_key("tm2", "delayed"), 0, -1)]
    client.zadd(keys.queue_key("tm2", "delayed"), {tid: now - 2000})  # became due 2 s ago
    (task,) = take(client, "tm2")
    commands.finish("tm2", "w", [(task.id, task.lease, "", False)], result_ttl=0).run(client)
    t = readmodel.timings(client, "tm2", "1h")
    assert 1.0 <= t["wait"]["p50"][-1] <= 2.5  # the bin (1 s, 2.5 s]; from the enqueue it would be > 1 h


def test_failed_attempts_count_their_run_and_wait(client):
    """A failed attempt adds its run and wait times too."""
    _finish(client, "tm3", 2, failed=True)
    t = readmodel.timings(client, "tm3", "1h")
    assert t["run"]["count"][-1] == 2 and t["wait"]["count"][-1] == 2


def test_a_new_bucket_drops_the_one_that_left_the_span(client):
    """Buckets older than their level's span are dropped as new ones begin: the hash stays bounded."""
    key = keys.queue_key("tm4", "timings")
    now = readmodel.server_ms(client)
    minute = now // 60000
    hour = minute // 60
    client.hset(
        key,
        mapping={
            "@m": minute - 1,
            f"m{minute - 60}:r1": 5,  # leaves the hour now
            f"m{minute - 59}:r1": 5,  # stays
            f"h{hour - 168}:r3": 5,  # left the week
            f"h{hour - 100}:r3": 5,
        },
    )
    _finish(client, "tm4")
    fields = {k.decode() for k in client.hkeys(key)}
    assert f"m{minute - 60}:r1" not in fields and f"m{minute - 59}:r1" in fields and f"h{hour - 100}:r3" in fields
    assert client.pttl(key) > 7 * 86_400_000
    # a queue quiet for longer than each level's span: every old bucket goes at once
    key = keys.queue_key("tm4b", "timings")
    old = minute - 60 * 24 * 8
    olds = {f"m{old - 1}:r1", f"m{old}:r1", f"q{old // 15}:r1", f"h{old // 60}:r1", f"h{old // 60 - 1}:w2"}
    client.hset(key, mapping={"@m": old, **dict.fromkeys(olds, 1)})
    _finish(client, "tm4b")
    fields = {k.decode() for k in client.hkeys(key)}
    assert not fields & olds and {f[0] for f in fields} == {"@", "m"}


def test_quantiles_of_known_samples():
    """Percentiles from the fixed buckets: exact at bin edges, linear inside a bin, the last bound past it."""
    bins = len(durations.BUCKETS) + 1
    counts = [0] * bins
    counts[durations.BUCKETS.index(0.1)] = 100  # 100 runs in (0.05, 0.1]
    assert durations.quantile(counts, 0.5) == pytest.approx(0.075)
    assert durations.quantile(counts, 1.0) == pytest.approx(0.1)
    counts[durations.BUCKETS.index(1.0)] = 100  # and 100 in (0.5, 1]
    assert durations.quantile(counts, 0.5) == pytest.approx(0.1)
    assert durations.quantile(counts, 0.95) == pytest.approx(0.5 + 0.5 * 0.9)
    assert durations.quantile(counts, 0.99) == pytest.approx(0.5 + 0.5 * 0.98)
    over = [0] * bins
    over[-1] = 3
    assert durations.quantile(over, 0.5) == durations.BUCKETS[-1]
    assert durations.quantile([0] * bins, 0.5) is None


def test_percentiles_read_back_from_finished_tasks(client):
    """Known run times written by the finish path come back as the right percentiles."""
    key = keys.queue_key("tm5", "timings")
    now = readmodel.server_ms(client)
    m = now // 60000
    r = durations.BUCKETS.index(0.25) + 1  # (0.1, 0.25]
    client.hset(key, mapping={f"m{m}:r{r}": 90, f"m{m}:r{r + 2}": 10})  # and 10 in (0.5, 1]
    t = readmodel.timings(client, "tm5", "1h", now_ms=now)
    assert t["run"]["count"][-1] == 100
    assert t["run"]["p50"][-1] == pytest.approx(0.1 + 0.15 * 50 / 90)
    assert t["run"]["p95"][-1] == pytest.approx(0.5 + 0.5 * 5 / 10)
    assert t["wait"]["p50"][-1] is None


def test_line_chart_points_deploys_and_escaping():
    """One circle per bucket with a value, a deploy line with its label, every text escaped, and bounded output."""
    start, step = 1_700_000_000_000, 60000
    values = [None, 0.1, 0.2, None, 0.4]
    svg = str(
        charts.line_chart(
            "Run <time>",
            [("p50", "p50", values)],
            start,
            step,
            [{"label": "<script>alert(1)</script>", "at": start + 2 * step}, {"label": "old", "at": start - step}],
        )
    )
    assert svg.count("<circle") == 3 and svg.count("<polyline") == 2  # a gap splits the line
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert svg.count('class="wq-deploy"') == 1 and "old" not in svg  # out of range: not drawn
    assert 'aria-label="Run &lt;time&gt;"' in svg
    big = str(
        charts.line_chart(
            "x",
            [("p50", "p50", [1.0] * 100_000)],
            start,
            step,
            [{"label": "d" * 500, "at": start + i} for i in range(500)],
        )
    )
    assert big.count("<circle") == charts.MAX_POINTS and big.count('class="wq-deploy"') <= charts.MAX_DEPLOYS
    assert len(big) < 200_000 and "d" * 100 not in big.split("<title>Deploy")[0]


def test_graph_nodes_edges_and_more():
    """The graph draws a box per task with its state, edges between shown tasks, escapes ids, and says how many more."""
    nodes = [("q-a", "completed"), ("q-b", "failed"), ("q-<c>", "blocked")]
    svg = str(graphs.graph_svg(nodes, [("q-a", "q-b"), ("q-a", "q-<c>"), ("q-a", "q-zz")], url=lambda i: f"/t/{i}/"))
    assert svg.count('class="wq-node ') == 3 and svg.count('class="wq-edge"') == 2
    assert 'data-state="failed"' in svg and ">failed</text>" in svg and "q-<c>" not in svg
    many = str(graphs.graph_svg([(f"q-{i}", "pending") for i in range(300)], [], more=0))
    assert many.count('class="wq-node ') == graphs.MAX_NODES and "100 more not drawn" in many


@pytest.fixture
def staff(db):
    from django.contrib.auth.models import User
    from django.test import Client

    c = Client()
    c.force_login(User.objects.create_superuser("charts", "c@example.com", "pw"))
    return c


def test_queue_and_history_pages_draw_the_timing_charts(staff, client):
    """The queue page's charts section and the history page show run and wait charts for the span asked; a bad span is refused."""
    _finish(client, "tm6", 3)
    page = staff.get("/queues/q/tm6/").content.decode()
    assert 'id="wq-charts"' in page and page.count('data-chart="run"') == 1 and "3 tasks" in page
    assert '<details id="wq-timings">' in page  # collapsed unless asked for
    rate = page[page.index('data-chart="rate"') :]
    rate = rate[: rate.index("</svg>")]
    assert "3 attempts" in rate and rate.count("<circle") == 1  # the one minute that completed tasks
    assert "completed 3/min" in rate
    day = staff.get("/queues/q/tm6/?charts=24h").content.decode()
    assert '<details id="wq-timings" open>' in day and "per 15 min" in day
    hist = staff.get("/queues/q/tm6/history/?span=7d").content.decode()
    assert 'data-chart="wait"' in hist and "per 60 min" in hist
    assert staff.get("/queues/q/tm6/?charts=2w").status_code == 400
    mark_deploy("v9 <b>")
    page = staff.get("/queues/q/tm6/").content.decode()
    chart = page[page.index('id="wq-chart"') : page.index('id="wq-timings"')]  # the live throughput chart
    assert chart.count('class="wq-deploy"') == 1 and "v9 &lt;b&gt;" in chart
    assert page.count('class="wq-deploy"') == 4  # and the run time, wait time and per minute charts
    overview = staff.get("/queues/").content.decode()
    assert overview.count('class="wq-deploy"') == 1


def test_batch_and_workflow_pages_draw_their_graph(staff, client):
    """A batch's page draws its tasks and after= edges; a task's workflow page draws it and its descendants."""
    from queues import Batch

    b = Batch(description="graph")
    first, other = b.enqueue_many("tg1", ["a", "x"])
    second = Queue("tg1").enqueue("b", after=[first])  # a batch's own tasks wait for none: a child outside it
    Queue("tg2").enqueue("c", after=[second])
    page = staff.get(f"/queues/batches/{b.id}/").content.decode()
    assert page.count('class="wq-node ') == 3 and page.count('class="wq-edge"') == 1  # its tasks and their children
    assert f'data-id="{first}" data-state="pending"' in page and f'data-id="{second}" data-state="blocked"' in page
    flow = staff.get(f"/queues/task/{first}/workflow/").content.decode()
    assert flow.count('class="wq-node ') == 3 and flow.count('class="wq-edge"') == 2 and "3 tasks drawn" in flow
    child = staff.get(f"/queues/task/{second}/workflow/").content.decode()
    assert child.count('class="wq-node ') == 3  # its parent it waits for, itself, its child
    assert staff.get("/queues/task/nope/workflow/").status_code == 400


def test_a_user_without_the_dashboard_right_is_refused_the_new_pages(client, db):
    """The workflow page and the charts are behind the dashboard's own check, as every page."""
    from django.test import Client

    from tests.support.dashboard import make_user

    first = Queue("tg3").enqueue("a")
    c = Client()
    c.force_login(make_user("nobody", staff=False))
    for path in (f"/queues/task/{first}/workflow/", "/queues/q/tg3/?charts=7d", "/queues/q/tg3/history/?span=24h"):
        assert c.get(path).status_code in (302, 403), path


def test_a_real_worker_s_runs_and_waits_show_in_the_charts(client, workers):
    """A worker running 0.3 s tasks one at a time: runs read at least 0.25 s; the last of four queued waited for three runs."""
    from tests.conftest import wait_for, wait_registered

    q = Queue("t6")
    workers(["t6"], concurrency=1, name="charts-w")
    wait_registered(client, "charts-w")
    q.enqueue_many(['{"sleep": 0.3}'] * 4 + ['{"fail": "always"}'])
    wait_for(lambda: q.counts()["completed"] == 4 and q.counts()["failed"] == 1, timeout=60, message="5 outcomes")
    t = readmodel.timings(client, "t6", "1h")
    runs, waits = t["run"], t["wait"]
    assert sum(runs["count"]) == 5 and sum(waits["count"]) == 5  # the failed run counts too
    assert max(v for v in runs["p50"] if v is not None) >= 0.25  # a minute holds most of the 0.3 s runs
    assert max(v for v in waits["p99"] if v is not None) >= 0.5  # the 4th waited behind three runs of 0.3 s


def test_a_workflow_graph_stops_at_its_bound_and_counts_what_it_left(staff, client):
    """A task with 250 children: its workflow page draws 200 tasks and says the other 51 are not drawn."""
    parent = Queue("tg4").enqueue("p")
    Queue("tg4").enqueue_many([str(i) for i in range(250)], after=[parent])
    states, edges, more = readmodel.workflow(client, parent, 200)
    assert len(states) == 200 and more == 51 and len(edges) == 250
    page = staff.get(f"/queues/task/{parent}/workflow/").content.decode()
    assert page.count('class="wq-node ') == 200 and page.count('class="wq-edge"') == 199
    assert "51 more not drawn" in page and "200 tasks drawn" in page
