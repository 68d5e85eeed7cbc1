"""The dashboard's websocket: one consumer per open page. It checks access, watches for
access changes (``revocation``), picks the page's feed (``feeds``) and runs the coalescing pump
(``live``); nothing else.

Close codes (sent after accepting, so the page sees them): 4403 not allowed (anonymous, not
staff, no view permission; or no longer: logged out, deactivated, a permission removed),
4400 bad view argument, 4404 unknown queue, worker, task or batch (when the socket opens, as
its page answers 404), 4429 the user already has ``SOCKETS_PER_USER`` sockets open on this
process (the page says so and tries again once a minute), 4500 the pump stopped on an error
(the page reconnects). A bad message from the page never closes the socket: it is answered
with ``{"type": "error", "message"}``.
"""

import asyncio
import json
import logging
import threading
import time
from collections import Counter
from functools import partial
from urllib.parse import parse_qsl

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from ..conf import get_connection
from ..engine.errors import InvalidInput, TaskNotFound
from . import access, feeds, sections
from .live import LivePump, encode
from .revocation import Watch

log = logging.getLogger("worqr.dashboard")

#: The longest message a page may send (it sends only ``{"resync": true}``): longer is not read.
MAX_MESSAGE = 1024
#: Sockets one user may have open at once on one server process. A page opens one, so this is
#: 32 open dashboard tabs; more are closed with ``TOO_MANY`` (each socket's view costs refreshes
#: on the process's few snapshot threads, ``feeds.EXECUTOR``: one user can't take them all).
SOCKETS_PER_USER = 32
TOO_MANY = 4429
_lock = threading.Lock()
_open = Counter()  # user pk -> sockets of theirs open on this process


def _error(why):
    return {"type": "error", "message": f"message ignored: {why}"}


def _take_socket(user_pk):
    """One of the user's ``SOCKETS_PER_USER`` sockets, or False when they have them all."""
    with _lock:
        if _open[user_pk] >= SOCKETS_PER_USER:
            return False
        _open[user_pk] += 1
        return True


def _free_socket(user_pk):
    with _lock:
        _open[user_pk] -= 1
        if _open[user_pk] <= 0:
            del _open[user_pk]


def sockets_open(user_pk):
    """The user's sockets open on this process (for the tests and the curious)."""
    with _lock:
        return _open.get(user_pk, 0)


class DashboardConsumer(AsyncWebsocketConsumer):
    pump = task = redis = watch = None
    #: Logouts and access changes close the socket at once (pushed, see ``revocation``); as a
    #: backstop (a session that expired, Redis down when the change was announced), access is
    #: also checked again before a message sent more than this many seconds after the last
    #: check. Never on a timer: an idle socket costs nothing.
    recheck_every = 60.0
    checked_at = 0.0
    closed = False
    closing = None
    #: The user whose socket count this socket holds one of (None: none held).
    counted = None

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:  # however the socket ends (closed, cancelled, an error): its place is free
            self._uncount()

    async def refuse(self, code, reason=None):
        """Accept, then close with ``code``: a refusal before accepting reaches the browser
        only as a failed handshake, without the code."""
        await self.accept()
        await self.shut(code, reason)

    async def shut(self, code, reason=None):
        if not self.closed:
            self.closed = True
            await self.close(code=code, reason=reason)
        await self._stop()

    async def too_many(self):
        return await self.refuse(
            TOO_MANY, f"too many live pages: at most {SOCKETS_PER_USER} per user on this server; close some"
        )

    def _uncount(self):
        user_pk, self.counted = self.counted, None
        if user_pk is not None:
            _free_socket(user_pk)

    async def connect(self):
        user = self.scope.get("user")
        if not getattr(user, "is_authenticated", False):
            return await self.refuse(4403)
        session = self.scope.get("session")
        self.watch = Watch(user.pk, session.session_key if session else None, self._revoke, self._recheck)
        await self.watch.start()  # before the check, so no change can slip in between
        if not await access.acan_view(user):
            return await self.refuse(4403)
        if sockets_open(user.pk) >= SOCKETS_PER_USER:  # before any Redis read for it
            return await self.too_many()
        kwargs = self.scope["url_route"]["kwargs"]
        params = dict(parse_qsl(self.scope.get("query_string", b"").decode("latin-1")))
        conn = get_connection()
        try:
            feed = await sync_to_async(feeds.feed_for, thread_sensitive=False, executor=feeds.EXECUTOR)(
                conn.client, kwargs["view"], kwargs.get("arg"), params
            )
        except InvalidInput:
            return await self.refuse(4400)
        except TaskNotFound:
            return await self.refuse(4404)
        actions = await database_sync_to_async(access.allowed_actions)(user)
        if not _take_socket(user.pk):  # checked again as it is counted: others may have opened meanwhile
            return await self.too_many()
        self.counted = user.pk
        await self.accept()
        self.checked_at = time.monotonic()
        # Events come through the process's hub (one subscriber for every socket): no client here.
        self.pump = LivePump(None, feed, self.send_json, partial(sections.render_changed, actions=actions))
        self.task = asyncio.create_task(self.pump.run())
        self.task.add_done_callback(self._pump_done)

    def _pump_done(self, task):
        if not task.cancelled() and task.exception() is not None:
            log.error("worqr dashboard: live feed stopped", exc_info=task.exception())
            self.closing = asyncio.ensure_future(self.shut(4500))

    async def _revoke(self):
        """The session logged out: close now."""
        await self.shut(4403)

    async def _recheck(self):
        """The user changed (or changes may have been missed): close if access is gone. The
        closing is done by another task, which may stop the pump (the caller, maybe)."""
        self.checked_at = time.monotonic()
        session = self.scope.get("session")
        if await access.asession_can_view(session.session_key if session else None):
            return True
        self.closing = asyncio.ensure_future(self.shut(4403))
        return False

    async def send_json(self, message):
        if time.monotonic() - self.checked_at >= self.recheck_every and not await self._recheck():
            return
        # The one place messages leave: none longer than live.MAX_MESSAGE_BYTES (live.encode).
        for text in encode(message):
            if self.closed:
                return
            await self.send(text_data=text)

    async def receive(self, text_data=None, bytes_data=None):
        """The page may ask for a resync: ``{"resync": true}``. Anything else (a binary frame, a
        text over ``MAX_MESSAGE`` characters, bad or too deeply nested JSON, another message) is
        answered ``{"type": "error", "message"}`` and the socket stays open."""
        if text_data is None or len(text_data) > MAX_MESSAGE:
            return await self.send_json(_error(f"send JSON text of at most {MAX_MESSAGE} characters"))
        try:
            message = json.loads(text_data)
        except (ValueError, RecursionError):  # nested past Python's recursion limit: not a 1011 close
            return await self.send_json(_error("not valid JSON (or nested too deeply)"))
        if not (isinstance(message, dict) and message.get("resync") is True):
            return await self.send_json(_error('the only message is {"resync": true}'))
        if self.pump:
            self.pump.mark_dirty(full=True)

    async def disconnect(self, code):
        self.closed = True
        await self._stop()

    async def _stop(self):
        """Stop the pump and the watch, close this socket's Redis client and free its place in
        the user's count (once)."""
        self._uncount()
        task, self.task = self.task, None
        if task is not None:  # never the current task: shut() is run apart from the pump
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        watch, self.watch = self.watch, None
        if watch is not None:
            await watch.stop()
        redis, self.redis = self.redis, None
        if redis is not None:
            await redis.aclose()
