"""A small TCP proxy, written with asyncio, between the chaos run's processes (or a test's) and
Redis: it forwards bytes both ways and, when told, cuts every open connection, refuses new ones
for a while (it stops listening: a connect is refused, as by a Redis that is down), delays every
chunk it forwards, or loses the replies to requests Redis applied (``lose_replies``). It runs on
its own thread (``Proxy.start``); ``stop`` ends it."""

import asyncio
import random
import threading
import time

#: What ``lose_replies`` does to a connection whose reply it took: ``reset`` closes it at once
#: (the client reads a reset or a closed connection), ``drop`` keeps it open and silent (the
#: client waits for its socket timeout).
LOSS_MODES = ("reset", "drop")


class _Link:
    """One client connection and its connection to Redis."""

    def __init__(self, client, upstream):
        self.client, self.upstream = client, upstream
        self.lose_next = False  # a request was chosen: its reply is to be lost
        self.silent = False  # 'drop': everything from Redis is swallowed from now on


class Proxy:
    """``Proxy(upstream_port).start()`` listens on ``port`` (a free one) and forwards to Redis."""

    def __init__(self, upstream_port, upstream_host="127.0.0.1"):
        self.upstream = (upstream_host, upstream_port)
        self.port = None
        self.delay = 0.0  # seconds added before each forwarded chunk
        self.refuse_until = 0.0  # monotonic time until which new connections are closed at once
        self.lost = 0  # replies lost so far (``lose_replies``)
        self._loss = None  # the settings of ``lose_replies``, or None
        self._seen = 0  # requests that matched since ``lose_replies``
        self._links = set()
        self._loop = None
        self._server = None
        self._stopped = None  # set (on the proxy's loop) to end it
        self._thread = None
        self._ready = threading.Event()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self._thread = threading.Thread(target=self._run, name="worqr-chaos-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self):
        """Close every connection and stop listening; the thread ends."""
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(10)

    def _run(self):
        asyncio.run(self._main())

    async def _main(self):
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stopped.wait()
        self._server.close()
        self._close_all()  # each connection's tasks end by themselves
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if others:
            await asyncio.wait(others, timeout=5)

    def cut(self, refuse_for=0.0):
        """Close every open connection (both ends) and refuse new ones for ``refuse_for`` s."""
        self.refuse_until = time.monotonic() + refuse_for
        self._loop.call_soon_threadsafe(self._cut, refuse_for)

    def _cut(self, refuse_for):
        self._close_all()
        if refuse_for > 0 and self._server.is_serving():
            self._server.close()  # not listening: a connect is refused
            asyncio.ensure_future(self._listen_again(refuse_for))

    async def _listen_again(self, after):
        await asyncio.sleep(after)
        while not self._stopped.is_set():
            try:
                self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
                return
            except OSError:  # the port is not free yet: try again shortly
                await asyncio.sleep(0.05)

    def lose_replies(self, *, every=None, chance=None, mode="reset", match=None, limit=None, on_lost=None, seed=None):
        """From now on, lose the replies to some requests after forwarding them, so that Redis
        applies a request whose client never learns it did: every ``every``-th request, or each
        with probability ``chance``, among those (client-to-Redis chunks) that contain the bytes
        ``match`` (all when None); ``limit`` replies at most (None: no limit). The reply is taken
        off the connection, then ``mode`` (``LOSS_MODES``) resets the connection or leaves it
        silent. ``on_lost()`` runs on the proxy's thread after Redis answered and before the
        client learns anything (a test makes the task run meanwhile). ``lose_replies()`` with no
        ``every`` or ``chance`` stops losing them."""
        if mode not in LOSS_MODES:
            raise ValueError(f"mode must be one of {LOSS_MODES}, not {mode!r}")
        if every is None and chance is None:
            self._loss = None
            return
        rng = random.Random(seed)
        self._seen = 0
        self._loss = {"every": every, "chance": chance, "mode": mode, "match": match, "limit": limit, "rng": rng}
        self._loss["on_lost"] = on_lost

    def _chosen(self, data):
        """Whether the reply to the request in ``data`` is to be lost (``lose_replies``)."""
        loss = self._loss
        if loss is None or (loss["match"] is not None and loss["match"] not in data):
            return False
        if loss["limit"] is not None and self.lost >= loss["limit"]:
            return False
        self._seen += 1
        if loss["every"] is not None:
            return self._seen % loss["every"] == 0
        return loss["rng"].random() < loss["chance"]

    def _close_all(self):
        for link in list(self._links):
            link.client.transport.abort()
            link.upstream.transport.abort()
        self._links.clear()

    def open_connections(self):
        return len(self._links)

    async def _serve(self, reader, writer):
        if time.monotonic() < self.refuse_until:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:  # Redis is down: the client sees its connection closed
            writer.transport.abort()
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        await asyncio.gather(self._requests(reader, link), self._replies(up_reader, link))
        self._links.discard(link)
        for w in (writer, up_writer):
            w.transport.abort()

    async def _requests(self, reader, link):
        try:
            while data := await reader.read(65536):
                if self.delay:
                    await asyncio.sleep(self.delay)
                if not link.silent and self._chosen(data):
                    link.lose_next = True
                link.upstream.write(data)
                await link.upstream.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.upstream.transport.abort()

    async def _replies(self, reader, link):
        try:
            while data := await reader.read(65536):
                if link.lose_next or link.silent:
                    if link.lose_next:
                        await self._lost(link)
                    continue
                if self.delay:
                    await asyncio.sleep(self.delay)
                link.client.write(data)
                await link.client.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.client.transport.abort()

    async def _lost(self, link):
        """The reply in hand is lost: count it, run ``on_lost``, then reset or silence the link."""
        link.lose_next = False
        self.lost += 1
        loss = self._loss or {}
        on_lost = loss.get("on_lost")
        if on_lost is not None:
            await asyncio.to_thread(on_lost)
        if loss.get("mode", "reset") == "reset":
            link.client.transport.abort()
            link.upstream.transport.abort()
        else:
            link.silent = True
