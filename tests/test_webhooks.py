"""Webhook delivery: tasks created over the API with a callback, run by a real worker process,
POSTed to a real HTTP server in this test process (127.0.0.1, free port)."""

import re
import time

import pytest

from queues import Queue
from queues.testing import free_port
from tests.conftest import wait_for
from tests.support.api import Api, error, make_token
from tests.support.webhooks import WEBHOOK_ENV, Receiver

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hooks")]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def api():
    return Api(make_token("all", name="hooks"))


def create(api, queue, callback, **fields):
    r = api.post(
        "/api/tasks",
        {"queue": queue, "payload": fields.pop("payload", "hi"), "callback": callback, "backoff": 0.1, **fields},
    )
    assert r.status_code == 201, r.content
    return r.json()["id"]


def attempts(records):
    return [r["headers"]["X-Worqr-Attempt"] for r in records]


def test_delivery_posts_the_task_with_id_and_attempt_headers(api, receiver, workers):
    """A 2xx reply completes the task; the POST carries the task, seed aliases and headers."""
    tid = create(api, "hooks", receiver.plan("/ok", (204, "")), payload='{"order": 7}')
    workers(["hooks"], env=WEBHOOK_ENV)
    got = receiver.wait("/ok", 1)[0]
    assert got["body"] == {
        "id": tid,
        "queue": "hooks",
        "payload": '{"order": 7}',
        "topic": "hooks",
        "content": '{"order": 7}',
    }
    h = got["headers"]
    assert (h["X-Worqr-Task"], h["X-Worqr-Queue"], h["X-Worqr-Attempt"], h["Idempotency-Key"]) == (
        tid,
        "hooks",
        "1",
        tid,
    )
    assert h["Content-Type"] == "application/json"
    wait_for(lambda: Queue("hooks").counts()["completed"] == 1, message="completion")
    record = api.get(f"/api/tasks/{tid}")  # the ended task's record (RETENTION)
    assert record.status_code == 200 and record.json()["state"] == "completed", record.content
    wait_for(lambda: _idle("hooks"), message="the worker idle: no delivery in flight")
    assert len(receiver.on("/ok")) == 1


def test_too_many_requests_is_retried_without_using_an_attempt(api, receiver, workers):
    """{"code": 101} (after the backoff) and HTTP 429 (after its Retry-After) are delivered again with the same ..."""
    # ... attempt number, though the tasks have no retries: no attempt was used up.
    busy = receiver.plan("/busy", (200, {"code": 101}), (200, {"code": 101}), (200, {"code": 100}))
    limited = receiver.plan("/limited", (429, "slow down", {"Retry-After": "1"}), (200, {"code": 100}))
    a, b = create(api, "hooks", busy, retries=0), create(api, "hooks", limited, retries=0)
    workers(["hooks"], concurrency=2, env=WEBHOOK_ENV)
    wait_for(lambda: Queue("hooks").counts()["completed"] == 2, message="both deliveries")
    busy_runs, limited_runs = receiver.on("/busy"), receiver.on("/limited")
    assert attempts(busy_runs) == ["1", "1", "1"] and {r["body"]["id"] for r in busy_runs} == {a}
    assert attempts(limited_runs) == ["1", "1"] and {r["body"]["id"] for r in limited_runs} == {b}
    assert limited_runs[1]["at"] - limited_runs[0]["at"] >= 1.0  # Retry-After honoured
    assert busy_runs[1]["at"] - busy_runs[0]["at"] >= 0.1  # the backoff
    counts = Queue("hooks").counts()
    assert (counts["failures"], counts["failed"]) == (0, 0)


def test_server_error_then_success(api, receiver, workers):
    """A 500 is a failed attempt, retried with backoff; the second attempt succeeds."""
    tid = create(api, "hooks", receiver.plan("/flaky", (500, "database down"), (200, "ok")), retries=2)
    workers(["hooks"], env=WEBHOOK_ENV)
    wait_for(lambda: Queue("hooks").counts()["completed"] == 1, message="the retried delivery")
    assert attempts(receiver.on("/flaky")) == ["1", "2"]
    failure = Queue("hooks").failures()[0]
    assert failure["id"] == tid and "HTTP 500: database down" in failure["error"]


def test_a_reply_slower_than_the_callback_timeout_is_a_failed_attempt(api, receiver, workers):
    """CALLBACK_TIMEOUT is 1 s for these workers."""
    # a receiver taking 3 s fails the attempt after about 1 s; the retry succeeds.
    slow = receiver.plan("/slow", (200, "", {}, 3), (200, ""))
    tid = create(api, "hooks", slow, retries=1)
    workers(["hooks"], env=WEBHOOK_ENV)
    wait_for(lambda: Queue("hooks").counts()["completed"] == 1, message="the delivery after a timeout")
    runs = receiver.on("/slow")
    assert attempts(runs) == ["1", "2"]
    assert 1.0 <= runs[1]["at"] - runs[0]["at"] < 2.5
    failure = Queue("hooks").failures()[0]
    assert failure["id"] == tid and "timed out" in failure["error"]


def test_after_the_last_retry_the_task_is_kept_as_failed(api, receiver, workers, settings):
    """Always 500, and a refused connection."""
    # out of retries, each task stays in the failed set and the failure history (never silently deleted) and can be
    # read, then deleted, over the API.
    always = create(api, "hooks", receiver.plan("/down", (500, "")), retries=1)
    refused = create(api, "hooks", f"http://127.0.0.1:{free_port()}/", retries=0)
    workers(["hooks"], env=WEBHOOK_ENV)
    q = Queue("hooks")
    wait_for(lambda: q.counts()["failed"] == 2, message="both tasks to fail for good")
    assert attempts(receiver.on("/down")) == ["1", "2"]
    history = q.failures()
    assert [f["id"] for f in history].count(always) == 2 and [f["id"] for f in history].count(refused) == 1
    assert any("refused" in f["error"].lower() for f in history if f["id"] == refused)
    body = api.get(f"/api/tasks/{always}").json()
    assert (body["state"], body["attempts"]) == ("failed", 2) and "HTTP 500" in body["error"]
    assert api.delete(f"/api/tasks/{always}").json()["result"] == "deleted"


def test_hosts_outside_the_allow_list_are_refused_at_creation_and_at_delivery(api, receiver, workers, settings):
    """The API refuses the URL."""
    # a task enqueued from Python (which skips the API) with such a URL fails at delivery without any request being
    # made.
    error(api.post("/api/tasks", {"queue": "hooks", "payload": "x", "callback": "http://10.0.0.1/"}), 400, "callback")
    tid = Queue("hooks").enqueue("x", callback="http://internal.example:8080/admin", retries=0)
    workers(["hooks"], env=WEBHOOK_ENV)
    wait_for(lambda: Queue("hooks").counts()["failed"] == 1, message="the refused delivery")
    assert "not in WORQR['CALLBACK_ALLOWED_HOSTS']" in Queue("hooks").get(tid).error
    assert receiver.received == []


def test_the_seed_create_query_delete_flow_in_its_own_field_names(receiver, workers):
    """A client written for the seed."""
    # /create, /query, /delete with topic/content/retry/delay, a receiver answering {"code": 100}; only the base URL and
    # the token are new.
    seed = Api(make_token("enqueue_task", "view_dashboard", "cancel_task", name="seed-client"))
    target = receiver.plan("/later", (200, {"code": 100}))
    r = seed.post("/api/create", {"topic": "order", "delay": 1, "retry": 3, "callback": target, "content": "hello"})
    assert r.status_code == 200 and set(r.json()) == {"id"}
    tid = r.json()["id"]
    q = seed.post("/api/query", {"id": tid})
    assert q.status_code == 200
    task = q.json()
    assert {k: task[k] for k in ("id", "topic", "content", "callback", "max_retry", "has_retry")} == {
        "id": tid,
        "topic": "order",
        "content": "hello",
        "callback": target,
        "max_retry": 3,
        "has_retry": 0,
    }
    assert 0 <= task["execute_time"] - task["creat_time"] <= 2
    gone = seed.post(
        "/api/create", {"topic": "order", "delay": 30, "retry": 1, "callback": target, "content": "never"}
    ).json()["id"]
    assert seed.post("/api/delete", {"id": gone}).json()["result"] == "cancelled"
    error(seed.post("/api/query", {"id": gone}), 404)
    workers(["order"], env=WEBHOOK_ENV)
    got = receiver.wait("/later", 1, timeout=10)[0]
    assert got["at"] >= time.time() - 30 and got["body"]["topic"] == "order" and got["body"]["content"] == "hello"
    wait_for(lambda: Queue("order").counts()["completed"] == 1, message="completion")
    error(seed.post("/api/query", {"id": tid}), 404)
    wait_for(lambda: _idle("order"), message="the worker idle: no delivery in flight")
    assert [r["body"]["id"] for r in receiver.received] == [tid]


# -- the delivery function itself, in this process (same real server, no worker) -----------


def _task(url, attempt=1):
    from queues.engine.task import Task

    return Task(id="hooks-0123456789abcdef", queue="hooks", payload="p", attempt=attempt, callback=url)


def test_redirects_are_not_followed(receiver):
    """A redirect could lead past the allow-list: it is a failed attempt and is not followed."""
    from queues.webhooks import DeliveryFailed, deliver

    target = receiver.plan("/target", (200, ""))
    moved = receiver.plan("/moved", (302, "", {"Location": target}))
    with pytest.raises(DeliveryFailed, match="HTTP 302"):
        deliver(_task(moved))
    assert receiver.on("/target") == []


def test_reply_judgement(receiver, conn):
    """A 2xx or code 100 succeeds, even with an odd status."""
    # code 101 waits the backoff (0.2 s * 2**(attempt-1) in the test settings); Retry-After dates are understood.
    from email.utils import formatdate

    from queues import RetryLater
    from queues.webhooks import DeliveryFailed, deliver, retry_after

    deliver(_task(receiver.plan("/a", (201, "not json"))))
    deliver(_task(receiver.plan("/b", (503, {"code": 100}))))
    with pytest.raises(RetryLater) as busy:
        deliver(_task(receiver.plan("/c", (200, {"code": 101})), attempt=3))
    assert busy.value.seconds == pytest.approx(0.8)
    deliver(_task(receiver.plan("/e", (200, {"code": 7}))))  # a 2xx is success whatever the code
    with pytest.raises(DeliveryFailed, match="HTTP 404"):
        deliver(_task(receiver.plan("/d", (404, {"code": 7}))))
    assert 8 <= retry_after(formatdate(time.time() + 10, usegmt=True)) <= 10
    assert retry_after("soon") is None and retry_after("-5") == 0 and retry_after("1e9") == conn.config.backoff_max


def test_a_worker_serving_a_queue_without_handler_says_it_runs_only_callbacks(workers):
    """With callbacks allowed, a worker told to serve a queue that has no handler (a typo, say) says at start ..."""
    # ... that it will run only callback tasks there.
    worker = workers(["typo-queue", "t1"], env=WEBHOOK_ENV)
    wait_for(lambda: " serving typo-queue, t1 " in worker.output(), timeout=30, message="the worker to start")
    lines = [line for line in worker.output().splitlines() if "no handler" in line]
    assert len(lines) == 1, worker.output()
    assert "typo-queue" in lines[0] and "only callback tasks" in lines[0]
    assert "t1" not in lines[0]


# -- the allow-list: ports, private addresses, one resolution per delivery ------------------


def allow(settings, *entries):
    settings.WORQR = {**settings.WORQR, "CALLBACK_ALLOWED_HOSTS": list(entries)}


def test_an_allow_list_entry_with_a_port_allows_only_that_port(api, settings):
    """ "127.0.0.1:<port>" lets callbacks reach that port and no other."""
    # another port of the same host is refused at creation, and at delivery without any connection being made.
    from queues.webhooks import DeliveryFailed, deliver

    open_port, other = Receiver(), Receiver()
    try:
        port = open_port.server.server_address[1]
        allow(settings, f"127.0.0.1:{port}")
        create(api, "hooks", open_port.plan("/in", (200, "")))
        message = error(
            api.post("/api/tasks", {"queue": "hooks", "payload": "x", "callback": other.url("/x")}), 400, "callback"
        )
        assert "not in WORQR['CALLBACK_ALLOWED_HOSTS']" in message
        deliver(_task(open_port.url("/in")))
        with pytest.raises(DeliveryFailed, match="not in WORQR"):
            deliver(_task(other.url("/scan")))
        assert len(open_port.on("/in")) == 1 and other.received == []
    finally:
        open_port.close()
        other.close()


def test_names_resolving_to_private_addresses_are_refused_unless_an_ip_entry_allows_them(receiver, settings):
    """An allowed name that resolves to a loopback (or private, link-local) address is refused at delivery."""
    # an IP literal or CIDR entry covering the address allows it; "*" allows no private address.
    from queues.webhooks import DeliveryFailed, deliver

    port = receiver.server.server_address[1]
    allow(settings, "localhost")
    with pytest.raises(DeliveryFailed, match=r"localhost resolves to (127\.0\.0\.1|::1), a loopback address"):
        deliver(_task(f"http://localhost:{port}/by-name"))
    allow(settings, "*")
    with pytest.raises(DeliveryFailed, match="not in WORQR"):
        deliver(_task(f"http://127.0.0.1:{port}/literal"))
    assert receiver.received == []
    allow(settings, "localhost", "127.0.0.0/8")
    deliver(_task(f"http://localhost:{port}/by-name"))
    allow(settings, "127.0.0.1")
    deliver(_task(f"http://127.0.0.1:{port}/literal"))
    assert [r["path"] for r in receiver.received] == ["/by-name", "/literal"]
    assert receiver.received[0]["headers"]["Host"] == f"localhost:{port}"


def test_the_connection_goes_to_the_address_that_was_checked(receiver, settings, monkeypatch):
    """The host is resolved once per delivery and the request is sent to that address, with the name in the Host ..."""
    # ... header: a name that resolves elsewhere the second time (DNS rebinding) can't move the connection.
    import socket

    from queues.webhooks import deliver

    real, lookups = socket.getaddrinfo, []

    def rebinding(host, *args, **kwargs):
        if host != "rebind.test":
            return real(host, *args, **kwargs)
        lookups.append(host)
        address = "127.0.0.1" if len(lookups) % 2 else "127.0.0.2"  # the checked one, then another
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    port = receiver.server.server_address[1]
    allow(settings, "rebind.test", "127.0.0.1/32")
    deliver(_task(f"http://rebind.test:{port}/pinned"))
    assert lookups == ["rebind.test"]
    assert receiver.on("/pinned")[0]["headers"]["Host"] == f"rebind.test:{port}"


def test_a_reply_body_is_kept_in_the_error_up_to_1_kib(receiver):
    """A failed delivery's error quotes the receiver's reply body, its first 1 KiB and no more."""
    from queues.webhooks import DeliveryFailed, deliver

    body = "0123456789" * 500
    with pytest.raises(DeliveryFailed) as failed:
        deliver(_task(receiver.plan("/long", (500, body))))
    message = str(failed.value)
    assert body[:1024] in message and body[:1025] not in message and "HTTP 500" in message


def _idle(queue):
    """Whether the queue's (only) worker is in its idle set: it runs nothing and found nothing."""
    from queues.engine import keys

    return Queue(queue).client.scard(keys.queue_key(queue, "idle")) >= 1


def test_a_batch_task_delivery_carries_its_batch_in_a_header(receiver):
    """A webhook delivery of a batch's task (or a batch's callback) says which batch in X-Worqr-Batch."""
    from dataclasses import replace

    from queues.webhooks import deliver

    deliver(replace(_task(receiver.plan("/batch", (204, ""))), batch_id="b-00000000000000ab"))
    assert receiver.on("/batch")[0]["headers"]["X-Worqr-Batch"] == "b-00000000000000ab"
    deliver(_task(receiver.plan("/plain", (204, ""))))
    assert "X-Worqr-Batch" not in receiver.on("/plain")[0]["headers"]


# -- IPv6 forms that carry an IPv4 address: judged by that address --------------------------

#: IPv6 spellings of metadata (169.254.169.254), loopback and private IPv4 addresses: NAT64 (the
#: well-known and the local-use prefix), IPv4-mapped, IPv4-translated, IPv4-compatible, 6to4,
#: Teredo (server and client) and ISATAP.
CARRYING_PRIVATE = [
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::7f00:1",
    "64:ff9b::a00:1",
    "64:ff9b:1:a9fe:a9:fe00::",
    "64:ff9b:1::a9fe:a9fe",
    "::ffff:a9fe:a9fe",
    "::ffff:0:a9fe:a9fe",
    "::a9fe:a9fe",
    "::7f00:1",
    "2002:a9fe:a9fe::",
    "2002:7f00:1::1",
    "2001:0:808:808::8080:8080",
    "2001:0:a00:1::f7f7:f7f7",
    "2001:4860::5efe:a9fe:a9fe",
]
#: The same forms carrying public IPv4 addresses (8.8.8.8, 1.1.1.1): allowed by "*".
CARRYING_PUBLIC = ["64:ff9b::808:808", "::ffff:0:101:101", "2002:808:808::1", "2001:0:808:808::f7f7:f7f7"]


def test_ipv6_forms_carrying_a_private_ipv4_address_are_refused_at_the_api_and_at_delivery(api, settings, client):
    """With "*" allowed, a callback to an IPv6 literal that carries a private, loopback or link-local IPv4 ..."""
    # ... address is refused with 400 (nothing written) and, enqueued from Python, at delivery before any connection;
    # the same forms carrying a public IPv4 address are accepted.
    from queues.webhooks import DeliveryFailed, deliver

    allow(settings, "*")
    for literal in CARRYING_PRIVATE:
        for url in (f"http://[{literal}]/", f"http://[{literal}]:6379/"):
            message = error(
                api.post("/api/tasks", {"queue": "hooks", "payload": "x", "callback": url}), 400, "callback"
            )
            assert re.search(
                r"\((which carries the IPv4 address \S+, )?a (private|loopback|link-local) address\)$", message
            )
            with pytest.raises(DeliveryFailed, match=r"not in WORQR\['CALLBACK_ALLOWED_HOSTS'\]"):
                deliver(_task(url))
    assert client.dbsize() == 0
    for literal in CARRYING_PUBLIC:
        create(api, "hooks", f"https://[{literal}]/hook")


def test_a_name_whose_aaaa_record_carries_a_private_ipv4_address_is_refused_at_delivery(settings, monkeypatch):
    """An allowed name resolving (AAAA) to a NAT64, 6to4 or Teredo form of a private address is refused before ..."""
    # ... any connection is made, naming the IPv4 address it carries; only the resolver is replaced (the name's answer).
    import socket

    from queues.webhooks import DeliveryFailed, deliver

    real, answers = socket.getaddrinfo, {}

    def resolver(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (answers[host], port, 0, 0))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    allow(settings, "*")
    for n, (literal, carried) in enumerate(
        [("64:ff9b::a9fe:a9fe", "169.254.169.254"), ("2002:7f00:1::", "127.0.0.1"), ("::ffff:0:a00:1", "10.0.0.1")]
    ):
        answers[f"aaaa{n}.test"] = literal
        with pytest.raises(DeliveryFailed, match=rf"aaaa{n}\.test resolves to {literal}, which carries the IPv4 ad"):
            deliver(_task(f"http://aaaa{n}.test:6379/"))
        with pytest.raises(DeliveryFailed, match=rf"carries the IPv4 address {re.escape(carried)}"):
            deliver(_task(f"http://aaaa{n}.test/"))


def test_a_callback_task_that_expires_is_never_posted_and_its_callback_gets_an_expired_notice(api, receiver, workers):
    """expires=0.5 into a paused queue, resumed after 1 s: the receiver gets one notice with outcome expired, no payload."""
    q = Queue("hooks-late")
    q.pause()
    tid = q.enqueue('{"order": 7}', callback=receiver.plan("/late", (204, "")), expires=0.5)
    time.sleep(1.0)
    q.resume()
    workers(["hooks-late"], env=WEBHOOK_ENV)
    got = receiver.wait("/late", 1)[0]
    assert got["body"]["id"] == tid and got["body"]["outcome"] == "expired" and got["body"]["queue"] == "hooks-late"
    assert "payload" not in got["body"] and "content" not in got["body"] and got["body"]["expires_at"]
    h = got["headers"]
    assert (h["X-Worqr-Task"], h["X-Worqr-Outcome"], h["Idempotency-Key"]) == (tid, "expired", f"{tid}:expired")
    record = api.get(f"/api/tasks/{tid}")  # the ended task's record: expired, never run
    assert record.status_code == 200 and record.json()["state"] == "expired", record.content
    assert record.json()["attempts"] == 0
    wait_for(lambda: Queue("hooks-late").counts()["completed"] == 1, message="the notice delivered")
    wait_for(lambda: _idle("hooks-late"), message="the worker idle: no delivery in flight")
    assert len(receiver.on("/late")) == 1 and Queue("hooks-late").counts()["expired"] == 1


def test_an_expired_notice_that_fails_is_retried_like_any_callback_task(api, receiver, workers):
    """The notice is a callback task with the expired task's retries and backoff: a 500 is retried."""
    from queues.engine.expired import notice_id

    q = Queue("hooks-late2")
    q.pause()
    tid = q.enqueue(
        "x", callback=receiver.plan("/late2", (500, "down"), (200, "")), expires=0.3, retries=3, backoff=0.1
    )
    time.sleep(0.6)
    q.resume()
    workers(["hooks-late2"], env=WEBHOOK_ENV)
    got = receiver.wait("/late2", 2)
    assert [r["headers"]["X-Worqr-Attempt"] for r in got] == ["1", "2"]
    assert all(r["body"]["id"] == tid and r["body"]["outcome"] == "expired" for r in got)
    # delivered: it completes (its worker records that just after the answer)
    wait_for(lambda: q.get(notice_id("hooks-late2", tid)) is None, timeout=30, message="the notice to complete")
