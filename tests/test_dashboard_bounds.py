"""Every live section of the dashboard is bounded, whatever the data (issue 32): the worst that an
enqueue token, a handler's logs and errors, or a webhook receiver's replies can put in Redis is
written here with the engine's own calls, each page's sections are rendered from it as the live
socket renders them, and a real socket under a real Daphne stays open on those pages."""

import json

import pytest

from queues import Queue
from queues.dashboard import feeds, live, sections
from queues.engine import commands, keys, upkeep
from tests.browser import DaphneServer
from tests.support.dashboard import forced_cookie, make_queue_names, open_socket, staff

#: The documented bound of one websocket message (README "Live updates"; Daphne refuses over 1 MiB).
MESSAGE_MAX = 512 * 1024
#: What one section may weigh at most here: half a message, so a page's update takes few.
SECTION_MAX = 256 * 1024
#: Every action shown: the largest rendering.
ACTIONS = [
    "cancel_task",
    "retry_task",
    "delete_task",
    "retry_all_failed",
    "pause_queue",
    "purge_queue",
    "manage_schedules",
    "manage_limits",
]
QUEUE = "q" + "w" * 199  # the longest name
WORKER = "w" * 200
QUOTES = '"' * 5000  # escaped six times over in HTML (&quot;)
ANGLES = "<" * 30000  # four times (&lt;)


def fail_once(client, task, error, traceback, retries=0):
    commands.fail(
        QUEUE, WORKER, task.id, task.lease, error, traceback, retries=retries, backoff=0, backoff_max=0, jitter=0,
        history=100,
    ).run(client)  # fmt: skip


def take(client, n):
    return commands.start(QUEUE, WORKER, n, lock_ttl=600, grace=1, default_timeout=0, result_ttl=60).run(client).tasks


def worst_queue(client):
    """The queue ``QUEUE`` at its worst: a failure history of 100 failures of 33 error shapes
    (2,000-character errors, 20,000-character tracebacks; one task failed 39 times); 200 tasks in
    process (200-character locks, 20 tags of quotes, 500-quote progress messages, payloads of
    quotes), one with 1,000 log lines of 2,000 quotes; tasks pending, delayed, blocked and waiting
    for locks. Returns (the logged task's id, the id of the task that failed 39 times)."""
    q = Queue(QUEUE)
    tags = [f"{i:02d}" + '"' * 98 for i in range(20)]
    commands.register(QUEUE, WORKER, ttl=600, lock_ttl=600, grace=1, default_timeout=0, fresh=True).run(client)
    again = q.enqueue(QUOTES, retries=1000)
    for i in range(39):
        (task,) = take(client, 1)
        fail_once(client, task, f"E{i % 13:02d}: " + ANGLES[:1990], ANGLES[:20000], retries=1000)
    q.enqueue_many([QUOTES] * 61, retries=0)
    failing = [t for t in take(client, 62) if t.id != again]
    for i, task in enumerate(failing[:60]):
        fail_once(client, task, f"F{i % 20 if i < 50 else 0:02d}: " + ANGLES[:1990], ANGLES[:20000])
    for i in range(200):
        q.enqueue(QUOTES, lock=f"{i:04d}" + '"' * 196, tags=tags)
    started = take(client, 200)
    reports = [(t.id, t.lease, 0.5, '"' * 500, []) for t in started]
    logged = started[0]
    reports[0] = (logged.id, logged.lease, 0.5, '"' * 500, ['"' * 2000] * 1000)
    commands.progress(QUEUE, reports).run(client)
    for i in range(100):
        q.enqueue(QUOTES, lock=f"{i:04d}" + '"' * 196, tags=tags)  # waiting for the locks held
    q.enqueue_many([QUOTES] * 60, tags=tags)
    q.enqueue_many([QUOTES] * 60, delay=3600, tags=tags)
    q.enqueue_many([QUOTES] * 60, after=[logged.id], tags=tags)
    return logged.id, again


def worst_workers(client, queues):
    """300 live workers serving ``queues`` each (their heartbeats as a worker writes them), and
    100 gone ones that served them too."""
    info = {"host": "h" * 200, "pid": 1, "queues": queues, "concurrency": 1000, "ttl_ms": 600000}
    for i in range(300):
        name = f"{i:03d}".ljust(200, "w")
        client.set(keys.heartbeat_key(name), json.dumps(dict(info, instance=str(i))), px=600000)
        client.sadd(keys.WORKER_REGISTRY, name)
    client.set(keys.heartbeat_key(WORKER), json.dumps(dict(info, queues=[QUEUE, *queues])), px=600000)
    client.sadd(keys.WORKER_REGISTRY, WORKER)
    for i in range(100):
        upkeep.remember_gone(client, {"name": f"g{i:03d}".ljust(200, "g"), "how": "stopped", "queues": queues})


def first_update(client, view, arg=None):
    """The first update the live socket sends of a view: every section, rendered from a snapshot."""
    snapshot = feeds.feed_for(client, view, arg, {}).snapshot()
    html = sections.render(snapshot, list(sections.SECTIONS[view]), ACTIONS)
    return {"type": "update", "full": True, "now_ms": snapshot["now_ms"], "sections": html}


def test_the_documented_bound_is_the_codes():
    """live.MAX_MESSAGE_BYTES is the 512 KiB the README documents, half of Daphne's 1 MiB."""
    assert live.MAX_MESSAGE_BYTES == MESSAGE_MAX


def test_every_section_of_every_page_is_bounded_at_its_worst(client, db):
    """At their worst, every section of the overview, queue, task, workers and worker pages is under 256 KiB."""
    # And each page's full update goes in messages of at most 512 KiB, leaving nothing out.
    names = make_queue_names(client, 2000)
    logged, failed_often = worst_queue(client)
    worst_workers(client, names[:1000])
    for view, arg in (
        ("overview", None),
        ("queue", QUEUE),
        ("task", logged),
        ("task", failed_often),
        ("workers", None),
        ("worker", WORKER),
    ):
        update = first_update(client, view, arg)
        too_big = {name: len(html.encode()) for name, html in update["sections"].items()}
        assert not {name: size for name, size in too_big.items() if size > SECTION_MAX}, (view, too_big)
        messages = live.encode(update)
        assert all(len(m) <= MESSAGE_MAX for m in messages), (view, [len(m) for m in messages])
        assert not any("omitted" in json.loads(m) for m in messages), view


def test_what_is_left_out_is_counted_with_a_link(client, db):
    """Each cut list says how many more there are and links to where they are all seen."""
    names = make_queue_names(client, 120)
    logged, failed_often = worst_queue(client)
    html = {}
    for view, arg in (("overview", None), ("queue", QUEUE), ("task", failed_often), ("task", logged)):
        html.update(first_update(client, view, arg)["sections"])
        if arg == failed_often:
            html["failed_often"] = html.pop("failures")
    counts = Queue(QUEUE).counts()
    assert "1–50 of 121 queues" in html["queues"] and 'href="?page=2"' in html["queues"]
    assert names[49] in html["queues"] and names[50] not in html["queues"]
    assert f"{counts['active'] - 50} more tasks in process not shown here" in html["active"]
    assert "q=queue%3A" + QUEUE + "+state%3Aactive" in html["active"]
    assert f"{counts['delayed'] - 50} more delayed tasks" in html["delayed"]
    assert f"{counts['blocked'] - 50} more blocked tasks" in html["blocked"]
    assert f"{counts['failed'] - 50} more failed tasks" in html["failed"]
    assert "23 more error shapes not shown here" in html["failure_groups"]  # 33 shapes, 10 shown
    assert f'href="/queues/q/{QUEUE}/failures/"' in html["failure_groups"]
    assert "10 more failures of this shape" in html["failure_groups"]  # F00: 13 failures, 3 shown
    assert f"/queues/q/{QUEUE}/failures/?shape=F00%3A" in html["failure_groups"]
    assert "990 more earlier lines not shown here" in html["log"]  # 10 lines of 2,000 shown
    assert f"/queues/task/{logged}/log/" in html["log"]
    assert "34 more older failures not shown here" in html["failed_often"]  # 39, 5 shown
    assert f"failures/?task={failed_often}" in html["failed_often"]


def test_the_links_go_to_pages_that_show_what_was_left_out(client, db):
    """The failures page lists every failure (of a task, of a shape) with its traceback; the log page every line."""
    from django.test import Client

    logged, failed_often = worst_queue(client)
    web = Client()
    assert web.get(f"/queues/task/{logged}/log/").status_code == 302  # staff only: to the login page
    web.force_login(staff("reader"))
    log = web.get(f"/queues/task/{logged}/log/")
    assert log["Content-Type"] == "text/plain; charset=utf-8" and log.content == ('"' * 2000 + "\n").encode() * 1000
    page = web.get(f"/queues/q/{QUEUE}/failures/", {"task": failed_often}).content.decode()
    assert "1–20 of 39 failures, page 1 of 2" in page and page.count('class="wq-tb"') == 20
    assert '<a href="?task=' + failed_often + '&amp;page=2">' in page and "&lt;" * 5999 in page
    page2 = web.get(f"/queues/q/{QUEUE}/failures/", {"task": failed_often, "page": 2}).content.decode()
    assert "21–39 of 39 failures" in page2
    shape = web.get(f"/queues/q/{QUEUE}/failures/", {"shape": "F00: " + "&lt;" * 295}).content.decode()
    assert shape.count('class="wq-tb"') == 0  # a shape is its key as the queue page gives it
    key = feeds.feed_for(client, "queue", QUEUE, {}).snapshot()["failure_groups"]["groups"][0]["key"]
    shape = web.get(f"/queues/q/{QUEUE}/failures/", {"shape": key}).content.decode()
    assert key.startswith("F00: ") and shape.count('class="wq-tb"') == 13
    assert web.get(f"/queues/q/{QUEUE}/failures/", {"task": "nope"}).status_code == 400
    assert web.get("/queues/q/nope/failures/").status_code == 404


@pytest.fixture(scope="module")
def server():
    daphne = DaphneServer()
    try:
        yield daphne.wait_ready()
    finally:
        daphne.stop()


def test_pages_that_broke_their_socket_stay_live_over_a_real_socket(server, transactional_db, client):
    """Under Daphne, the overview of 2,000 long names, a queue of 100 failures and a task of big logs stay live."""
    # Before, each first update was over 1 MiB: Daphne refused to send it and closed with 4500.
    first = make_queue_names(client, 2000)[0]
    logged, _ = worst_queue(client)
    cookie = forced_cookie(staff("bounds"))
    for path, change in (
        ("/ws/queues/overview/", lambda: Queue(first).enqueue("one more")),  # a queue of its first page
        (f"/ws/queues/queue/{QUEUE}/", lambda: Queue(QUEUE).enqueue("one more")),
        (f"/ws/queues/task/{logged}/", lambda: Queue(QUEUE).cancel(logged)),  # it shows "cancelling"
    ):
        ws = open_socket(server, path, cookie)  # it has received its first update
        change()
        update = json.loads(ws.recv(timeout=20))  # still open: the next update comes
        assert update["type"] == "update", path
        ws.close()
