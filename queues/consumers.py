"""The dashboard's websocket: one consumer per open page. It checks access, picks the page's
feed (``dashboard.feeds``) and runs the coalescing pump (``dashboard.live``); nothing else.

Close codes: 4403 not allowed (anonymous, not staff, no view permission), 4400 bad view
argument, 4404 unknown queue, 4500 the pump stopped on an error (the page reconnects).
"""

import asyncio
import json
import logging
import time
from urllib.parse import parse_qsl

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from .conf import get_connection
from .dashboard import access, feeds
from .dashboard.live import LivePump
from .engine.errors import InvalidInput, TaskNotFound

log = logging.getLogger("worqr.dashboard")


class DashboardConsumer(AsyncWebsocketConsumer):
    pump = task = redis = None
    #: Seconds after which access is checked again (from the session, in the database) before
    #: the next message, so a logged-out or demoted user stops receiving within about a minute
    #: of the next change. Never on a timer: an idle socket costs nothing.
    recheck_every = 60.0
    checked_at = 0.0

    async def connect(self):
        if not await access.acan_view(self.scope.get("user")):
            await self.close(code=4403)
            return
        kwargs = self.scope["url_route"]["kwargs"]
        params = dict(parse_qsl(self.scope.get("query_string", b"").decode("latin-1")))
        conn = get_connection()
        try:
            feed = await sync_to_async(feeds.feed_for, thread_sensitive=False, executor=feeds.EXECUTOR)(
                conn.client, kwargs["view"], kwargs.get("arg"), params
            )
        except InvalidInput:
            await self.close(code=4400)
            return
        except TaskNotFound:
            await self.close(code=4404)
            return
        await self.accept()
        self.checked_at = time.monotonic()
        self.redis = conn.async_client()
        self.pump = LivePump(self.redis, feed, self.send_json)
        self.task = asyncio.create_task(self.pump.run())
        self.task.add_done_callback(self._pump_done)

    def _pump_done(self, task):
        if not task.cancelled() and task.exception() is not None:
            log.error("worqr dashboard: live feed stopped", exc_info=task.exception())
            asyncio.ensure_future(self.close(code=4500))

    async def send_json(self, message):
        if time.monotonic() - self.checked_at >= self.recheck_every:
            self.checked_at = time.monotonic()
            session = self.scope.get("session")
            if not await access.asession_can_view(session.session_key if session else None):
                self.task.cancel()  # stops the pump at its next await
                await self.close(code=4403)
                return
        await self.send(text_data=json.dumps(message))

    async def receive(self, text_data=None, bytes_data=None):
        """The page may ask for a resync: ``{"resync": true}``."""
        try:
            message = json.loads(text_data or "{}")
        except ValueError:
            return
        if isinstance(message, dict) and message.get("resync") and self.pump:
            self.pump.mark_dirty(full=True)

    async def disconnect(self, code):
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.redis is not None:
            await self.redis.aclose()
