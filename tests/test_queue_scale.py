"""Pages and lists that cost the same whatever the number of queues (issue 32): the overview, the
queue list of the HTTP API and ``/metrics`` read a page of queues (and their names), never every
queue's counts: the Redis commands they cost are the same at 600 queues and at 3,000, and so is
the size of what they answer. (The timings at 30,000 queues are measured by
``bench/many_queues.py``, not asserted here: a loaded machine would make them flaky.)"""

import json
import re

import pytest
from django.test import Client

from queues.engine import commands, keys
from tests.support.api import Api, make_token
from tests.support.dashboard import commands_processed, queues_of_one_task, staff


def cost(client, request):
    """(Redis commands, bytes) of one request."""
    before = commands_processed(client)
    answer = request()
    assert answer.status_code == 200, answer.content[:300]
    return commands_processed(client) - before - 1, len(answer.content)


@pytest.fixture
def callers(db):
    web = Client()
    web.force_login(staff("scaler"))
    return web, Api(make_token("view_dashboard"))


def test_pages_cost_the_same_at_600_and_3000_queues(client, callers):
    """The overview, /metrics and /api/queues cost as many Redis commands and bytes at 3,000 queues as at 600."""
    web, api = callers
    queues_of_one_task(client, 600)
    requests = {
        "overview": lambda: web.get("/queues/"),
        "metrics": lambda: api.get("/metrics"),
        "api": lambda: api.get("/api/queues"),
    }
    for request in requests.values():  # the scripts loaded (a first call loads them: more commands)
        request()
    small = {name: cost(client, r) for name, r in requests.items()}
    names = [f"t{i:05d}" for i in range(2400)]  # after the first ones: the first pages stay the same
    commands.run_pipelined(client, [commands.enqueue(q, [(f"{q}-{0:016x}", b"payload", "", "")]) for q in names])
    client.sadd(keys.KNOWN_QUEUES, *names)
    large = {name: cost(client, r) for name, r in requests.items()}
    for name in requests:
        (c1, b1), (c2, b2) = small[name], large[name]
        assert c2 == c1 and abs(b2 - b1) < 200, (name, small[name], large[name])
    assert small["overview"][0] < 500 and small["api"][0] < 1200 and small["metrics"][0] < 6000


def test_the_api_lists_every_queue_once_page_by_page(client, callers):
    """Following `next` from page to page gives every queue once, in order, with the total."""
    _, api = callers
    names = queues_of_one_task(client, 250)
    seen, after = [], None
    while True:
        page = api.get("/api/queues?limit=100" + (f"&after={after}" if after else "")).json()
        assert page["total"] == 250 and len(page["queues"]) <= 100
        seen += [q["name"] for q in page["queues"]]
        after = page["next"]
        if after is None:
            break
    assert seen == names
    assert [q["name"] for q in api.get("/api/queues").json()["queues"]] == names[:100]  # 100 by default
    for bad in ("limit=0", "limit=1001", "limit=x", "limit=%C2%B2", "after=bad%7Bq"):
        answer = api.get(f"/api/queues?{bad}")
        assert answer.status_code == 400 and answer.json()["field"] in ("limit", "after"), bad


def test_metrics_give_the_series_of_500_queues_served_ones_first(client, callers):
    """With 700 queues /metrics says so, gives the series of 500, and a queue a worker serves is among them."""
    _, api = callers
    names = queues_of_one_task(client, 700)
    commands.register(names[-1], "w1", ttl=600, lock_ttl=600, grace=1, default_timeout=0, fresh=True).run(client)
    client.set(keys.heartbeat_key("w1"), json.dumps({"queues": [names[-1]], "ttl_ms": 600000}), px=600000)
    client.sadd(keys.WORKER_REGISTRY, "w1")
    text = api.get("/metrics").content.decode()
    assert "worqr_queues 700.0" in text and "worqr_queues_exported 500.0" in text
    pending = re.findall(r'^worqr_queue_pending\{queue="([^"]+)"\}', text, re.M)
    assert len(pending) == 500 and names[-1] in pending and names[499] not in pending
