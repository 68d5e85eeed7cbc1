"""A small TCP proxy, written with asyncio, between the chaos run's processes and Redis: it
forwards bytes both ways and, when told, cuts every open connection, refuses new ones for a
while, or delays every chunk it forwards. It runs on its own thread (``Proxy.start``)."""

import asyncio
import threading
import time


class Proxy:
    """``Proxy(upstream_port).start()`` listens on ``port`` (a free one) and forwards to Redis."""

    def __init__(self, upstream_port, upstream_host="127.0.0.1"):
        self.upstream = (upstream_host, upstream_port)
        self.port = None
        self.delay = 0.0  # seconds added before each forwarded chunk
        self.refuse_until = 0.0  # monotonic time until which new connections are closed at once
        self._writers = set()
        self._loop = None
        self._ready = threading.Event()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        threading.Thread(target=self._thread, name="worqr-chaos-proxy", daemon=True).start()
        self._ready.wait(10)
        return self

    def _thread(self):
        self._loop = asyncio.new_event_loop()
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def cut(self, refuse_for=0.0):
        """Close every open connection (both ends) and refuse new ones for ``refuse_for`` s."""
        self.refuse_until = time.monotonic() + refuse_for
        self._loop.call_soon_threadsafe(self._close_all)

    def _close_all(self):
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    def open_connections(self):
        return len(self._writers) // 2

    async def _serve(self, reader, writer):
        if time.monotonic() < self.refuse_until:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:  # Redis is down: the client sees its connection closed
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.transport.abort()

    async def _pump(self, reader, writer):
        try:
            while data := await reader.read(65536):
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()
