"""Charts per handler: the run and wait times and the completed and failed attempts the scripts
keep per handler name (a Tasks framework function) beside the queue's, the cap on the handlers
kept apart, the queue page's handler selector, and its answers to bad ``?handler=``."""

import pytest

from queues import Queue
from queues.engine import commands, durations, keys, readmodel
from tests.engine_calls import fail, take

SLOW, FAST = "app.tasks.slow", "app.tasks.fast"


def _run(client, queue, names, seconds=0.0, failed=()):
    """One task per name in ``names`` ('': none), started ``seconds`` ago and finished now under
    that handler name (those in ``failed``: failed)."""
    Queue(queue).enqueue_many(["x"] * len(names))
    tasks = take(client, queue, count=len(names))
    now = readmodel.server_ms(client)
    for t in tasks:
        client.hset(keys.task_key(queue, t.id), "st", now - int(seconds * 1000))
    acks = []
    for t, name in zip(tasks, names, strict=True):
        if name in failed:
            fail(client, t, error="E", history=10, handler=name)
        else:
            acks.append((t.id, t.lease, "", False, "", name))
    if acks:
        commands.finish(queue, "w", acks, result_ttl=0).run(client)


def _slot(client, queue, name):
    return readmodel.handler_slot(client, queue, name)


def test_two_handlers_of_one_queue_keep_their_own_run_times_and_counts(client):
    """A handler's runs of about 2 s and another's of a few ms read apart, each with its own completed and failed counts; the queue has both."""
    _run(client, "hc1", [SLOW, SLOW], seconds=2.0)
    _run(client, "hc1", [FAST, FAST, FAST, FAST], seconds=0.0, failed=())
    _run(client, "hc1", [FAST], failed=(FAST,))
    assert readmodel.handlers(client, "hc1") == [(SLOW, 1), (FAST, 2)]
    slow = readmodel.timings(client, "hc1", "1h", slot=_slot(client, "hc1", SLOW))
    fast = readmodel.timings(client, "hc1", "1h", slot=_slot(client, "hc1", FAST))
    whole = readmodel.timings(client, "hc1", "1h")
    assert sum(slow["run"]["count"]) == 2 and 1.0 <= slow["run"]["p50"][-1] <= 2.5
    assert sum(fast["run"]["count"]) == 5 and fast["run"]["p50"][-1] <= 0.1
    assert sum(whole["run"]["count"]) == 7
    assert (sum(slow["completed"]), sum(slow["failed"])) == (2, 0)
    assert (sum(fast["completed"]), sum(fast["failed"])) == (4, 1)
    for span in ("24h", "7d"):  # the newest minute, not rolled up yet, counts at every span
        t = readmodel.timings(client, "hc1", span, slot=_slot(client, "hc1", FAST))
        assert sum(t["run"]["count"]) == 5 and sum(t["completed"]) == 4, span
    # a task without a handler name (a native @handler's) counts for its queue only
    _run(client, "hc1", [""])
    assert sum(readmodel.timings(client, "hc1", "1h")["run"]["count"]) == 8
    assert [h for h, _ in readmodel.handlers(client, "hc1")] == [SLOW, FAST]
    Queue("hc1").drop()
    assert not client.exists(keys.queue_key("hc1", "timings"))


def test_a_handler_s_new_minute_rolls_its_last_one_up(client):
    """A handler's minute is rolled up into its quarter hour and hour when its next minute begins, its counts with it."""
    _run(client, "hc2", [SLOW])
    key = keys.queue_key("hc2", "timings")
    slot = _slot(client, "hc2", SLOW)
    prev = readmodel.server_ms(client) // 60000 - 1
    client.hset(key, mapping={f"{slot}.@m": prev, f"{slot}.m{prev}:r3": 7, f"{slot}.m{prev}:c": 7})
    client.hdel(key, *[k for k in client.hkeys(key) if k.startswith(f"{slot}.m{prev + 1}".encode())])
    _run(client, "hc2", [SLOW])
    assert int(client.hget(key, f"{slot}.q{prev // 15}:r3")) == 7
    assert int(client.hget(key, f"{slot}.h{prev // 60}:c")) == 7
    assert int(client.hget(key, f"{slot}.@m")) == prev + 1
    day = readmodel.timings(client, "hc2", "24h", slot=slot)
    assert sum(day["completed"]) == 7 + 1


def test_handlers_past_the_cap_are_counted_together_as_other(client):
    """The first 50 names get their own charts; the ones after count together under "other", and the names are not stored."""
    names = [f"app.t{i}.run" for i in range(durations.HANDLERS_MAX + 3)]
    for start in range(0, len(names), 20):
        _run(client, "hc3", names[start : start + 20])
    kept = readmodel.handlers(client, "hc3")
    assert len(kept) == durations.HANDLERS_MAX + 1 and kept[-1] == (durations.OTHER, 0)
    assert [n for n, _ in kept[:-1]] == names[: durations.HANDLERS_MAX]
    other = readmodel.timings(client, "hc3", "1h", slot=0)
    assert sum(other["run"]["count"]) == 3 and sum(other["completed"]) == 3
    key = keys.queue_key("hc3", "timings")
    assert not client.hexists(key, f"@n:{names[-1]}") and int(client.hget(key, "@nc")) == durations.HANDLERS_MAX
    _run(client, "hc3", [names[0]])  # a kept name still has its own
    assert sum(readmodel.timings(client, "hc3", "1h", slot=1)["run"]["count"]) == 2
    assert readmodel.handler_slot(client, "hc3", names[-1]) is None


def test_handler_names_are_checked():
    """A handler name is a dotted Python path of at most 200 characters; "other" and anything else are not."""
    assert durations.is_handler_name("app.tasks.send_email") and durations.is_handler_name("a.b")
    for bad in ("other", "send", "a..b", "a.b ", "a.b:c", "{q}.x", "a.<b>", "é.x", "a." + "b" * 199, "", None, 3):
        assert not durations.is_handler_name(bad), bad


@pytest.fixture
def staff(db):
    from django.contrib.auth.models import User
    from django.test import Client

    c = Client()
    c.force_login(User.objects.create_superuser("hcharts", "h@example.com", "pw"))
    return c


def _run_chart(page):
    """The run time chart's heading and SVG in a page."""
    at = page.index('data-chart="run"')
    return page[at : page.index("</svg>", at)]


def test_the_handler_selector_shows_that_handler_s_figures_not_the_queue_s(staff, client):
    """?handler= draws that handler's run times and counts (2 slow tasks), not the queue's 6; the selector links every handler."""
    _run(client, "hc4", [SLOW, SLOW], seconds=2.0)
    _run(client, "hc4", [FAST] * 4)
    whole = staff.get("/queues/q/hc4/?tab=charts").content.decode()
    assert "6 tasks" in _run_chart(whole)
    assert f'data-handler="{SLOW}" href="?tab=charts&amp;charts=1h&amp;handler={SLOW}#wq-timings"' in whole
    assert f'data-handler="{FAST}"' in whole and ">whole queue</a>" in whole
    page = staff.get(f"/queues/q/hc4/?tab=charts&handler={SLOW}").content.decode()
    run = _run_chart(page)
    assert "2 tasks" in run and "6 tasks" not in run and "(2 tasks)" in run  # its point's title too
    assert '<details id="wq-timings" open>' in page and f"handler <code>{SLOW}</code>" in page
    assert (
        f'data-handler="{SLOW}" href="?tab=charts&amp;charts=1h&amp;handler={SLOW}#wq-timings" aria-current="true"'
        in page
    )
    rate = page[page.index('data-chart="rate"') :]
    assert "2 attempts" in rate[: rate.index("</svg>")]
    fast = _run_chart(staff.get(f"/queues/q/hc4/?charts=24h&handler={FAST}").content.decode())
    assert "4 tasks" in fast and "per 15 min" in fast
    # the span links keep the handler
    assert f"charts=7d&amp;handler={FAST}#wq-timings" in staff.get(f"/queues/q/hc4/?handler={FAST}").content.decode()


def test_a_queue_without_handler_names_shows_no_selector(staff, client):
    """A queue whose handler is a plain @handler (no names sent) has no handler selector."""
    _run(client, "hc5", [""])
    page = staff.get("/queues/q/hc5/?tab=charts").content.decode()
    assert "whole queue" not in page and "wq-handlers" not in page and "1 task" in _run_chart(page)


def test_a_bad_or_unknown_handler_is_a_clear_400_or_404(staff, client):
    """A malformed ?handler= is a 400 saying what a name is, an unknown one a 404 naming it; never a 500."""
    _run(client, "hc6", [SLOW])
    for bad in ("<script>x</script>", "a b", "x" * 300, "{hc6}:timings", "a.b\n", "other.", "'; DROP"):
        r = staff.get("/queues/q/hc6/", {"handler": bad})
        assert r.status_code == 400, bad
        assert "is not a handler name" in r.content.decode() and "<script>x" not in r.content.decode()
    for unknown in ("app.tasks.nope", "other"):
        r = staff.get("/queues/q/hc6/", {"handler": unknown})
        assert r.status_code == 404 and "has no charts for handler" in r.content.decode(), unknown
    assert staff.get("/queues/q/nope-queue/", {"handler": SLOW}).status_code == 404
    assert staff.get("/queues/q/hc6/", {"handler": SLOW, "charts": "2w"}).status_code == 400


def test_a_user_without_the_dashboard_right_is_refused_a_handler_s_charts(client, db):
    """A handler's charts are behind the queue page's own check."""
    from django.test import Client

    from tests.support.dashboard import make_user

    _run(client, "hc7", [SLOW])
    c = Client()
    c.force_login(make_user("nobody-h", staff=False))
    assert c.get("/queues/q/hc7/", {"handler": SLOW}).status_code in (302, 403)
    c.force_login(make_user("staff-h", staff=True))  # staff without the dashboard permission
    assert c.get("/queues/q/hc7/", {"handler": SLOW}).status_code in (302, 403)


def test_real_workers_chart_two_tasks_framework_functions_apart(client, workers):
    """A worker running two Tasks framework functions of one queue (0.3 s and instant): each is its own handler, with its own run times."""
    from tests.conftest import wait_for
    from tests.tasksapp import tasks

    slow, fast = tasks.chart_slow.module_path, tasks.chart_fast.module_path
    for _ in range(3):
        tasks.chart_slow.enqueue()
        tasks.chart_fast.enqueue()
    workers(["dt-default"], concurrency=2)
    wait_for(
        lambda: Queue("dt-default").counts()["pending"] == 0 and Queue("dt-default").counts()["active"] == 0,
        timeout=60,
        message="6 tasks to run",
    )
    wait_for(
        lambda: sum(readmodel.timings(client, "dt-default", "1h")["run"]["count"]) == 6,
        timeout=30,
        message="6 runs recorded",
    )
    assert sorted(h for h, _ in readmodel.handlers(client, "dt-default")) == sorted([slow, fast])
    s = readmodel.timings(client, "dt-default", "1h", slot=readmodel.handler_slot(client, "dt-default", slow))
    f = readmodel.timings(client, "dt-default", "1h", slot=readmodel.handler_slot(client, "dt-default", fast))
    assert sum(s["run"]["count"]) == 3 and sum(f["run"]["count"]) == 3 and sum(s["completed"]) == 3
    assert min(v for v in s["run"]["p50"] if v is not None) >= 0.25
    assert max(v for v in f["run"]["p50"] if v is not None) < 0.25


def test_a_batch_of_acks_mixes_named_plain_and_traced_ones(client):
    """One finish call with a named ack carrying a traceparent and a plain one: both complete, the name counts one run."""
    Queue("hc8").enqueue_many(["a", "b"])
    named, plain = take(client, "hc8", count=2)
    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    codes = commands.finish(
        "hc8", "w", [(named.id, named.lease, "", False, trace, SLOW), (plain.id, plain.lease, "", False)], result_ttl=0
    ).run(client)
    assert [c.name for c in codes] == ["COMPLETED", "COMPLETED"]
    assert sum(readmodel.timings(client, "hc8", "1h")["run"]["count"]) == 2
    slot = _slot(client, "hc8", SLOW)
    assert sum(readmodel.timings(client, "hc8", "1h", slot=slot)["completed"]) == 1
