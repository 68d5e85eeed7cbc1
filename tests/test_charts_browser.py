"""The charts and graphs in a real headless Chromium against a real Daphne: the queue page's run
and wait time charts (points per span, the span selector, a deploy's line and label, dark mode),
a batch's graph coloured by state, and a large batch's "N more"."""

import os

import pytest

from queues import Batch, Queue, mark_deploy
from queues.engine import commands, durations, keys, readmodel
from tests.browser import CHROMIUM
from tests.engine_calls import fail, take
from tests.support.browser import login, shot
from tests.test_dashboard_search_bulk_browser import SCREENSHOTS

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium (make browser)")


def _docs_shot(locator, name):
    """A screenshot of one part of a page in test-artifacts; with WORQR_SCREENSHOTS=1 (``make
    screenshots``) also the docs' one, in docs/screenshots/."""
    if os.environ.get("WORQR_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    shot(locator.page, name)


def _run(client, queue, completed, failed):
    Queue(queue).enqueue_many(["x"] * (completed + failed))
    tasks = take(client, queue, count=completed + failed)
    commands.finish(queue, "w", [(t.id, t.lease, "", False) for t in tasks[:completed]], result_ttl=0).run(client)
    for t in tasks[completed:]:
        fail(client, t)


def test_queue_charts_points_span_switch_and_deploy_marker(operator, server, page, client):
    """Completed and failed tasks give one point per bucket that ran tasks; 1h/24h/7d switch; a deploy shows its label, inert."""
    expect = playwright_api.expect
    now = readmodel.server_ms(client)
    m, q, h = now // 60000, now // 900000, now // 3600000
    bin_ = durations.BUCKETS.index(0.5) + 1
    # tasks that ran earlier: two minutes of the last hour, a quarter hour of the day, an hour of the week
    client.hset(
        keys.queue_key("ch1", "timings"),
        mapping={f"m{m - 20}:r{bin_}": 4, f"m{m - 40}:r{bin_}": 2, f"q{q - 30}:r{bin_}": 6, f"h{h - 100}:r{bin_}": 6},
    )
    _run(client, "ch1", completed=3, failed=2)  # and five now
    mark_deploy("v2.3 <script>window.pwned=1</script>")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, server.url + "/queues/q/ch1/?tab=charts")
    charts = page.locator("#wq-timings")
    expect(charts).not_to_have_attribute("open", "")  # compact: closed until asked for
    charts.locator("summary").click()
    run = charts.locator("[data-chart=run]")
    expect(run.locator("[data-series=p50] circle")).to_have_count(3)  # m-40, m-20, now
    expect(run.locator("[data-series=p99] circle")).to_have_count(3)
    expect(charts.locator("[data-chart=wait] [data-series=p50] circle")).to_have_count(1)  # only the real ones waited
    expect(run).to_contain_text("11 tasks")
    label = run.locator(".wq-deploy-label")
    expect(label).to_have_text("v2.3 <script>window.pwned=1</script>")
    assert page.evaluate("window.pwned") is None and not dialogs
    shot(page, "charts-1h")
    charts.get_by_role("link", name="24h").click()
    charts = page.locator("#wq-timings")
    expect(charts).to_have_attribute("open", "")
    expect(charts.locator("summary")).to_contain_text("last 24h")
    expect(charts.locator("[data-chart=run] [data-series=p50] circle")).to_have_count(2)  # q-30, now
    failed = charts.locator("[data-chart=rate] [data-series=failed] circle")
    expect(failed).to_have_count(1)  # the quarter they failed in
    expect(charts.locator("[data-chart=rate]")).to_contain_text("5 attempts")
    charts.get_by_role("link", name="7d").click()
    expect(page.locator("#wq-timings [data-chart=run] [data-series=p95] circle")).to_have_count(2)  # h-100, now
    expect(page.locator("#wq-timings [data-chart=run] .wq-deploy-label")).to_have_count(1)
    client.delete(keys.DEPLOYS)
    mark_deploy("v2.4")
    page.goto(server.url + "/queues/q/ch1/?charts=1h#wq-timings")
    _docs_shot(page.locator("#wq-timings"), "charts")
    # dark mode: the lines take the theme's colours, never the light theme's on a dark page
    page.emulate_media(color_scheme="dark")
    page.reload()
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    stroke = page.evaluate(
        "getComputedStyle(document.querySelector('#wq-timings [data-series=p95] polyline, #wq-timings [data-series=p95] circle')).fill"
    )
    assert bg != stroke and stroke not in ("rgb(0, 0, 0)", "rgb(51, 51, 51)")
    shot(page, "charts-7d-dark")


def test_batch_graph_nodes_by_state_and_large_batch_more(operator, server, page, client):
    """A batch of 5 with an after= edge draws 5 boxes coloured by state; a 300-task batch draws 200 and says 100 more."""
    expect = playwright_api.expect
    b = Batch(description="graph")
    ids = b.enqueue_many("cg1", ["a", "b", "c", "d"])
    child = Queue("cg2").enqueue("after a", after=[ids[0]])
    done, failed, running = take(client, "cg1", count=3)
    commands.finish("cg1", "w", [(done.id, done.lease, "", False)], result_ttl=60).run(client)
    fail(client, failed)
    login(page, server.url + f"/queues/batches/{b.id}/")
    graph = page.locator("#wq-graph svg")
    expect(graph.locator(".wq-node")).to_have_count(5)
    expect(graph.locator(".wq-edge")).to_have_count(1)
    states = {
        i: graph.locator(f".wq-node[data-id='{i}']").get_attribute("data-state")
        for i in (done.id, failed.id, running.id, ids[3], child)
    }
    assert states == {
        done.id: "completed",
        failed.id: "failed",
        running.id: "active",
        ids[3]: "pending",
        child: "blocked",
    }
    fills = {
        s: graph.locator(f".wq-node[data-id='{i}'] rect").evaluate("r => getComputedStyle(r).fill")
        for i, s in states.items()
    }
    assert len(set(fills.values())) == 4  # four states, four colours (pending and blocked share the grey)
    expect(graph.locator(f".wq-node[data-id='{failed.id}'] text").nth(1)).to_have_text(
        "failed"
    )  # the state as text too
    _docs_shot(page.locator("#wq-graph"), "batch-graph")
    graph.locator(f".wq-node[data-id='{done.id}']").click()
    expect(page).to_have_url(f"{server.url}/queues/task/{done.id}/")

    big = Batch(description="big")
    big.enqueue_many("cg3", [str(i) for i in range(300)])
    page.goto(server.url + f"/queues/batches/{big.id}/")
    expect(page.locator("#wq-graph svg .wq-node")).to_have_count(200)
    expect(page.locator("#wq-graph svg .wq-more")).to_have_text("100 more not drawn")


def test_handler_selector_switches_the_charts_to_one_handler(operator, server, page, client):
    """Two handlers of one queue: the selector's links draw each one's charts (its own count and run times), and back to the whole queue."""
    expect = playwright_api.expect
    from tests.test_handler_charts import FAST, SLOW
    from tests.test_handler_charts import _run as run_named

    run_named(client, "ch2", [SLOW, SLOW], seconds=2.0)
    run_named(client, "ch2", [FAST] * 3, failed=(FAST,))
    login(page, server.url + "/queues/q/ch2/?tab=charts&charts=1h")
    charts = page.locator("#wq-timings")
    expect(charts.locator("[data-chart=run]")).to_contain_text("5 tasks")
    selector = charts.get_by_role("navigation", name="Handler of the charts")
    expect(selector.get_by_role("link")).to_have_count(3)  # whole queue and the two handlers
    selector.get_by_role("link", name=SLOW).click()
    charts = page.locator("#wq-timings")
    expect(charts).to_have_attribute("open", "")
    expect(charts.locator("summary")).to_contain_text(f"handler {SLOW}")
    expect(charts.locator("[data-chart=run]")).to_contain_text("2 tasks")
    title = charts.locator("[data-chart=run] .wq-hit title").first.text_content()
    assert "(2 tasks)" in title and " s," in title  # its p50 in seconds: the queue's would mix in the ms runs
    expect(charts.get_by_role("link", name=SLOW)).to_have_attribute("aria-current", "true")
    charts.get_by_role("link", name="24h").click()  # the span keeps the handler
    expect(page.locator("#wq-timings summary")).to_contain_text(f"last 24h, handler {SLOW}")
    page.locator("#wq-timings").get_by_role("link", name=FAST).click()
    charts = page.locator("#wq-timings")
    expect(charts.locator("[data-chart=run]")).to_contain_text("3 tasks")
    expect(charts.locator("[data-chart=rate] [data-series=failed] circle")).to_have_count(1)
    charts.get_by_role("link", name="whole queue").click()
    expect(page.locator("#wq-timings [data-chart=run]")).to_contain_text("5 tasks")
    page.emulate_media(color_scheme="dark")
    page.goto(server.url + f"/queues/q/ch2/?tab=charts&handler={SLOW}")
    link = page.locator(f"#wq-timings [data-handler='{SLOW}']")
    colour = link.evaluate("a => getComputedStyle(a).color")
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert colour != bg
    shot(page, "charts-handler-dark")
    bad = page.goto(server.url + "/queues/q/ch2/?handler=%3Cscript%3E")
    assert bad.status == 400
    expect(page.locator("body")).to_contain_text("is not a handler name")
