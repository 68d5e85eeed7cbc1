"""A search's budget (issue 32): one step of a search makes at most so many Redis round trips
(counted on the client's own connections) and skips empty lists a thousand at a time, says
where and why it stopped, stops when the client goes, and a process runs two at once."""

import asyncio
import os
import time

import pytest
import redis
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.test import Client

from queues.dashboard.views import search as search_view
from queues.engine import keys, readmodel
from queues.engine.budget import GONE, ROUND_TRIPS, Budget
from tests.support.dashboard import commands_processed, queues_of_one_task, staff

URL = os.environ["WORQR_REDIS_URL"]
#: Counted on the single test Redis (its URL opens the counting client; INFO stats of one server).
pytestmark = pytest.mark.usefixtures("redis_server")


class CountingConnection(redis.Connection):
    """A connection that counts what it sends: one packed send is one round trip (a command,
    or a whole pipeline)."""

    sent = 0

    def send_packed_command(self, command, check_health=True):
        CountingConnection.sent += 1
        return super().send_packed_command(command, check_health)


@pytest.fixture
def counted():
    """A Redis client whose round trips are counted (``counted.trips()``)."""
    pool = redis.ConnectionPool.from_url(URL, connection_class=CountingConnection)
    client = redis.Redis(connection_pool=pool)
    client.ping()
    start = CountingConnection.sent
    client.trips = lambda: CountingConnection.sent - start
    yield client
    pool.disconnect()


def test_a_step_makes_at_most_its_budget_of_round_trips(client, counted):
    """Over 3,000 queues a word that matches nothing stops at 100 round trips, and says so and where."""
    # Before: 3,000 queues of 8 lists each, one round trip per list and two per task: ~27,000.
    queues_of_one_task(client, 3000)
    before = counted.trips()
    page = readmodel.search(counted, "nomatch", budget=Budget(100, 600))
    assert counted.trips() - before == page.round_trips <= 100
    assert page.stopped == ROUND_TRIPS and page.cursor is not None and page.tasks == []
    assert 40 <= page.queues_reached < 3000 and page.queues == 3000 and page.scanned >= 40
    # Step after step, the search reaches the end, each step within the budget.
    cursor, steps, reached = page.cursor, 1, page.queues_reached
    while cursor:
        before = counted.trips()
        page = readmodel.search(counted, "nomatch", cursor=cursor, budget=Budget(100, 600))
        assert counted.trips() - before == page.round_trips <= 100
        cursor, steps, reached = page.cursor, steps + 1, max(reached, page.queues_reached)
    assert reached == 3000 and page.stopped is None and steps < 100


def test_empty_lists_are_skipped_a_thousand_at_a_time(client, counted):
    """3,000 queues with nothing in them: a search looks at their 27,000 lists in 28 round trips."""
    names = queues_of_one_task(client, 3000)
    for q in names:
        client.delete(keys.queue_key(q, "pending"))
    before = counted.trips()
    page = readmodel.search(counted, "nomatch", budget=Budget(100, 600))
    assert page.cursor is None and page.stopped is None and page.queues_reached == 3000
    assert counted.trips() - before == page.round_trips <= 29


def test_a_search_told_to_stop_reads_nothing_more(client, counted):
    """A budget whose client went stops a search before its next round trip."""
    queues_of_one_task(client, 100)
    budget = Budget(100, 600)
    budget.stop.set()
    before = counted.trips()
    page = readmodel.search(counted, "nomatch", budget=budget)
    assert page.stopped == GONE and counted.trips() - before == 1  # the queues' names, then nothing


def test_the_page_shows_the_budget_and_where_the_step_stopped(client, transactional_db):
    """The search page says it stopped early, after how much, and offers to search further."""
    queues_of_one_task(client, 3000)
    web = Client()
    web.force_login(staff("searcher"))
    before = commands_processed(client)
    page = web.get("/queues/search/", {"q": "nomatch"}).content.decode()
    assert "may take\n  100 Redis round trips and 2.0 s at most" in page
    assert "Stopped early: this step used its\n    100 Redis round trips" in page
    assert " of 3000 queues (" in page and 'id="wq-further"' in page
    assert commands_processed(client) - before < 100 * 1000  # commands, over 100 round trips at most


def test_a_process_runs_two_searches_at_once_and_says_so_to_a_third(client, transactional_db, monkeypatch):
    """With both turns taken, a search waits its budget's time, then answers 503 with a message."""
    monkeypatch.setattr(search_view, "SEARCH_SECONDS", 0.2)
    web = Client()
    web.force_login(staff("third"))
    assert search_view._turns.acquire(timeout=1) and search_view._turns.acquire(timeout=1)
    try:
        answer = web.get("/queues/search/", {"q": "anything"})
    finally:
        search_view._turns.release()
        search_view._turns.release()
    assert answer.status_code == 503 and "running other searches: try again" in answer.content.decode()
    assert web.get("/queues/search/", {"q": "anything"}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_search_stops_when_its_client_goes(client, monkeypatch):
    """Through Django's ASGI handler, Redis hears no more of a long search once its client disconnects."""
    # Before, the search went on to its end (37 s over 30,000 queues) after the client had left.
    queues_of_one_task(client, 20000)
    monkeypatch.setattr(search_view, "SEARCH_ROUND_TRIPS", 10**9)
    monkeypatch.setattr(search_view, "SEARCH_SECONDS", 600.0)
    web = Client()
    web.force_login(staff("leaver"))
    cookie = f"{settings.SESSION_COOKIE_NAME}={web.cookies[settings.SESSION_COOKIE_NAME].value}"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/queues/search/",
        "raw_path": b"/queues/search/",
        "query_string": b"q=nomatch",
        "headers": [(b"host", b"testserver"), (b"cookie", cookie.encode())],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1),
    }

    async def scenario():
        inbox = asyncio.Queue()
        await inbox.put({"type": "http.request", "body": b"", "more_body": False})
        request = asyncio.create_task(get_asgi_application()(scope, inbox.get, lambda message: asyncio.sleep(0)))
        deadline = time.monotonic() + 30
        start = commands_processed(client)
        while commands_processed(client) - start < 2000:  # the search is under way
            assert time.monotonic() < deadline and not request.done()
            await asyncio.sleep(0.05)
        await inbox.put({"type": "http.disconnect"})
        await asyncio.sleep(0.5)  # the round trip under way ends
        quiet = commands_processed(client)
        await asyncio.sleep(1.0)
        heard = commands_processed(client) - quiet
        await asyncio.wait_for(request, 30)  # (before, the request ended only once the search had)
        return heard

    assert asyncio.run(scenario()) < 5  # the INFO calls that measure it
