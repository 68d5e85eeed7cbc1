"""The dashboard's websocket under a real Daphne, opened by a real websocket client: only the
site's own origins may open it, and a logout, a deactivation or a removed permission closes
a user's open sockets within 2 s, pushed across processes through Redis; a socket for an
unknown worker is closed with 4404, and a user's 33rd socket on a process with 4429."""

import json
import socket
import time
import urllib.request
from http.cookiejar import CookieJar
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Group
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from queues import Queue
from queues.engine import keys, upkeep
from tests.browser import DaphneServer
from tests.support.dashboard import forced_cookie, open_socket, perm, staff

TRUSTED = "http://trusted.example:8443"
CLOSE_WITHIN = 2.0  # seconds, as promised


@pytest.fixture(scope="module")
def server():
    daphne = DaphneServer(env={"DJANGO_CSRF_TRUSTED_ORIGINS": TRUSTED})
    try:
        yield daphne.wait_ready()
    finally:
        daphne.stop()


class WebSession:
    """A browser's cookies against the server: logs in and out through the admin's own views."""

    def __init__(self, server):
        self.server, self.jar = server, CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def _csrf_post(self, path, fields):
        token = next(c.value for c in self.jar if c.name == "csrftoken")
        data = urlencode({**fields, "csrfmiddlewaretoken": token}).encode()
        return self.opener.open(self.server.url + path, data, timeout=30)

    def login(self, username, password):
        self.opener.open(self.server.url + "/admin/login/", timeout=30).read()
        reply = self._csrf_post("/admin/login/", {"username": username, "password": password, "next": "/queues/"})
        assert reply.url.endswith("/queues/"), reply.url
        return self

    def logout(self):
        reply = self._csrf_post("/admin/logout/", {})
        assert "Logged out" in reply.read().decode()

    @property
    def cookie(self):
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)


def refused_status(server, path, cookie, origin, host=None):
    with pytest.raises(InvalidStatus) as refused:
        open_socket(server, path, cookie, origin, host)
    return refused.value.response.status_code


def closed_within(ws, seconds):
    """(seconds it took, close code) once the server closes ``ws``; fails after ``seconds``."""
    start = time.monotonic()
    while True:
        left = start + seconds - time.monotonic()
        if left <= 0:
            pytest.fail(f"the socket is still open after {seconds} s")
        try:
            ws.recv(timeout=left)  # an update sent meanwhile: keep waiting
        except TimeoutError:
            continue
        except ConnectionClosed as closed:
            return time.monotonic() - start, closed.rcvd.code if closed.rcvd else None


def still_live(ws, queue):
    """The socket gets the update of an enqueue on ``queue``: it is open and still served."""
    Queue(queue).enqueue("ping")
    assert ws.recv(timeout=10)


def test_only_the_sites_own_origins_may_open_the_socket(server, transactional_db):
    """With a valid staff session, a page from another port, host or scheme of the same machine, a handshake ..."""
    # ... without Origin and one with a Host outside ALLOWED_HOSTS are refused with 403; the site's own origin and
    # CSRF_TRUSTED_ORIGINS are accepted.
    cookie = forced_cookie(staff("origins"))
    path = "/ws/queues/overview/"
    port = server.port
    for origin in (
        "http://127.0.0.1:9999",
        f"http://localhost:{port}",
        f"https://127.0.0.1:{port}",
        "http://trusted.example",
        "null",
        None,
    ):
        assert refused_status(server, path, cookie, origin) == 403, origin
    assert refused_status(server, path, cookie, f"http://evil.example:{port}", host=f"evil.example:{port}") == 403
    open_socket(server, path, cookie).close()
    open_socket(server, path, cookie, origin=TRUSTED).close()
    open_socket(server, path, cookie, origin=f"http://localhost:{port}", host=f"localhost:{port}").close()


def test_logout_closes_that_sessions_sockets_within_2_s(server, transactional_db, client):
    """Logging out through the admin closes every socket of that session, in the server process, within 2 s ..."""
    # ... (code 4403); the same user's other session keeps its socket. The server process listens for these changes with
    # one Redis subscriber for all its sockets.
    redis = client
    Queue("t1").enqueue("x")
    staff("leaving")
    first = WebSession(server).login("leaving", "pw-leaving")
    second = WebSession(server).login("leaving", "pw-leaving")
    sockets = [open_socket(server, p, first.cookie) for p in ("/ws/queues/overview/", "/ws/queues/queue/t1/")]
    other = open_socket(server, "/ws/queues/queue/t1/", second.cookie)
    assert redis.pubsub_numsub(keys.ACCESS_CHANGES) == [(keys.ACCESS_CHANGES.encode(), 1)]  # one per process
    first.logout()
    for ws in sockets:
        took, code = closed_within(ws, CLOSE_WITHIN)
        assert code == 4403, code
    still_live(other, "t1")
    other.close()


def test_deactivation_and_removed_permissions_close_sockets_within_2_s(server, transactional_db):
    """Saving a user as inactive, removing their view permission, or removing it from their group (each in this ..."""
    # ... process) closes their sockets in the server within 2 s; a change that leaves access alone does not.
    Queue("t1").enqueue("x")
    viewers = Group.objects.create(name="viewers")
    viewers.permissions.add(perm("view_dashboard"))
    deactivated, demoted, grouped = staff("deactivated"), staff("demoted"), staff("grouped", group=viewers)
    sockets = {
        u: open_socket(server, "/ws/queues/queue/t1/", forced_cookie(u)) for u in (deactivated, demoted, grouped)
    }

    demoted.first_name = "still allowed"
    demoted.save()
    still_live(sockets[demoted], "t1")
    still_live(sockets[demoted], "t1")  # the re-check after the save kept it

    deactivated.is_active = False
    deactivated.save()
    assert closed_within(sockets[deactivated], CLOSE_WITHIN)[1] == 4403
    demoted.user_permissions.remove(perm("view_dashboard"))
    assert closed_within(sockets[demoted], CLOSE_WITHIN)[1] == 4403
    viewers.permissions.remove(perm("view_dashboard"))
    assert closed_within(sockets[grouped], CLOSE_WITHIN)[1] == 4403


def test_a_bad_message_is_answered_with_an_error_and_the_socket_stays_open(server, transactional_db):
    """JSON nested 100,000 deep (RecursionError), bad JSON, a binary frame, an over-long text and an unknown ..."""
    # ... message each get {"type": "error"} on a real socket, which stays open and still serves a resync.
    Queue("t1").enqueue("x")
    ws = open_socket(server, "/ws/queues/queue/t1/", forced_cookie(staff("sender")))
    for bad in ("[" * 100_000, "[" * 1000, '{"resync": ', b"\x00\x01", " " * 2000, '{"resync": "yes"}', "[]"):
        ws.send(bad)
        answer = json.loads(ws.recv(timeout=10))
        while answer.get("type") == "update":  # an update sent meanwhile
            answer = json.loads(ws.recv(timeout=10))
        assert answer["type"] == "error" and answer["message"].startswith("message ignored"), (bad[:20], answer)
    ws.send(json.dumps({"resync": True}))
    assert json.loads(ws.recv(timeout=10))["type"] == "update"
    still_live(ws, "t1")
    ws.close()


def close_code(server, path, cookie):
    """The code a socket to ``path`` is closed with before it shows anything (it is accepted, so
    the page can read the code)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    ws = connect(
        f"ws://127.0.0.1:{server.port}{path}",
        sock=sock,
        origin=server.url,
        additional_headers={"Cookie": cookie},
        open_timeout=15,
    )
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=15)
    return closed.value.rcvd.code if closed.value.rcvd else None


def test_a_worker_feed_of_a_worker_that_does_not_exist_is_closed_with_4404(server, transactional_db, client):
    """A socket for a worker neither online nor gone lately is closed with 4404, as its page answers 404; a known one opens."""
    cookie = forced_cookie(staff("workerwatcher"))
    upkeep.remember_gone(client, {"name": "w-was", "how": "stopped", "host": "h", "queues": ["t1"]})
    assert close_code(server, "/ws/queues/worker/w-nobody/", cookie) == 4404
    assert close_code(server, "/ws/queues/worker/w-nobody-2/", cookie) == 4404
    open_socket(server, "/ws/queues/worker/w-was/", cookie).close()  # served: its first update came


def test_a_page_past_the_last_is_the_last_page_s_feed(client, db):
    """A socket's ?page= past the last page (up to 10**9) shares the last page's feed, as the page shows the last one."""
    from queues.dashboard import feeds

    Queue("t1").enqueue_many(["x"] * 60)  # two pages of pending tasks
    for page in ("2", "3", "999999999"):
        assert feeds.feed_for(client, "queue", "t1", {"page": page}).key == ("queue", "t1", 2)
        assert feeds.feed_for(client, "overview", None, {"page": page}).key == ("OverviewFeed", 1)
        assert feeds.feed_for(client, "workers", None, {"page": page}).key == ("WorkersFeed", 1)
    assert feeds.feed_for(client, "queue", "t1", {}).key == ("queue", "t1", 1)


def test_a_user_may_have_32_sockets_open_and_the_33rd_is_closed_with_4429(server, transactional_db):
    """One session's 32nd socket is served, its 33rd (or one from the same user's other session) is closed with 4429; ..."""
    # ... another user is not affected, and once one of the 32 closes a new one is served again.
    Queue("t1").enqueue("x")
    heavy = staff("manytabs")
    cookie, other_session = forced_cookie(heavy), forced_cookie(heavy)
    paths = ["/ws/queues/overview/", "/ws/queues/queue/t1/", "/ws/queues/workers/", "/ws/queues/batches/"]
    sockets = [open_socket(server, paths[i % len(paths)], cookie) for i in range(32)]
    try:
        still_live(sockets[1], "t1")  # the 32nd is as served as the first
        assert close_code(server, "/ws/queues/overview/", cookie) == 4429
        assert close_code(server, "/ws/queues/queue/t1/?page=2", other_session) == 4429
        others = open_socket(server, "/ws/queues/queue/t1/", forced_cookie(staff("fewtabs")))
        still_live(others, "t1")
        others.close()
        sockets.pop().close()
        deadline = time.monotonic() + CLOSE_WITHIN
        while (code := close_code_or_open(server, "/ws/queues/overview/", cookie)) == 4429:
            assert time.monotonic() < deadline, "the closed socket's place was not freed"
            time.sleep(0.05)
        assert code is None  # served
    finally:
        for ws in sockets:
            ws.close()


def close_code_or_open(server, path, cookie):
    """None if a socket to ``path`` is served (its first update comes; it is closed again), else its close code."""
    try:
        open_socket(server, path, cookie).close()
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else -1
    return None
