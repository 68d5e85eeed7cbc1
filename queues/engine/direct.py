"""The short road to Redis for script calls: connections held between calls, without redis-py's
per-command machinery around each call.

For one EVALSHA redis-py does much more than the call needs: its pool takes a lock, checks the
process and moves the connection between its lists (and records metrics), then the command is
dispatched, packed argument by argument, wrapped for retries and parsed through reply callbacks.
On a one-by-one ``Queue.enqueue`` that took longer than Redis running the script, and a third
of a worker's own time per task went there (README, "Performance, round three").

``Direct`` (synchronous clients) and ``AsyncDirect`` (asyncio clients) keep a few connections
taken from the client's own pool, pack each call with a head packed once per script and queue,
send it and read the one reply. Their rules, which are what makes skipping the pool's checks
safe:

- a held connection is checked before each use as the pool checks the ones it hands out (closed
  by the server, or data waiting: connected again before anything is sent), and the client's
  health checks (``health_check_interval``) run as for its own commands;
- a connection goes back to the held ones only after its whole reply was read (an error reply
  is a whole reply); any other exception while it is out (a network error, a timeout, an
  interrupt, a cancellation) drops its socket first, and the next use connects again;
- held connections stay the pool's (counted by it, in use): closing the client closes them;
  beyond ``KEEP`` held (and always one short of the pool's ``max_connections``), a connection
  goes back to the pool, so the road never holds the pool's last connection while another
  command waits for one (a blocking pool would make it wait for ever);
- a script Redis does not know (a restart, a failover, ``SCRIPT FLUSH``) is loaded on the
  road's own connection, then the call made again: never through the pool, which the road's
  held connections may have filled;
- a forked child holds none of its parent's connections (redis-py closes them without touching
  the parent's end);
- network errors are retried as the client retries its own commands (the ``Retry`` of its
  connections: none for ``Connection.enqueue_client``), then raised.

Only a plain ``redis.Redis`` / ``redis.asyncio.Redis`` whose pool and connections are redis-py's
own, without client-side caching or replicas to wait for, is served (``for_client`` and
``for_async`` give None otherwise: a cluster or Sentinel client keeps its routing and failover).
"""

import asyncio
import builtins
import os
import select

import redis
import redis.asyncio
from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from .connection import is_noscript

#: Connections a road holds at most; more go back to the pool after their call.
KEEP = 8


def unsent(exc):
    """Whether ``exc``, raised by a call on a synchronous road, came before the call's command was
    written whole (a connect refused or failed, a held connection found closed and not opened
    again, a send that failed partway, the script's load that failed): then Redis never ran it.
    False when it may have run, and for errors of any other client (they may have)."""
    return getattr(exc, "worqr_unsent", False)


def _mark_unsent(exc):
    exc.worqr_unsent = True


_SYNC = (
    (redis.ConnectionPool,),
    (redis.Connection, redis.UnixDomainSocketConnection, redis.SSLConnection),
)
_ASYNC = (
    (redis.asyncio.ConnectionPool, redis.asyncio.BlockingConnectionPool),
    (redis.asyncio.Connection, redis.asyncio.UnixDomainSocketConnection, redis.asyncio.SSLConnection),
)


def _packer(encoder):
    """A function packing a call's arguments as the client's ``encoder`` would, with the
    common types (str in UTF-8, bytes, int) done without its chain of type checks: the
    arguments of a worker's ``start`` call (acknowledgements: ids, leases, results) were a
    twentieth of its time per task."""
    encode = encoder.encode
    utf8 = encoder.encoding.lower().replace("-", "") == "utf8" and encoder.encoding_errors == "strict"

    def pack(args):
        out = []
        for a in args:
            kind = type(a)
            if kind is str and utf8:
                a = a.encode()
            elif kind is int:
                a = b"%d" % a
            elif kind is not bytes:
                a = encode(a)
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    return pack


def _readable(conn):
    """Whether a connection that should have nothing to read has: data, or the server's end of
    the connection (a ``poll`` of its socket: what redis-py's ``can_read`` finds, in one system
    call instead of three)."""
    sock = getattr(conn, "_sock", False)
    if sock is False:  # not the socket connection this was written for: redis-py's own check
        return conn.can_read()
    if sock is None:
        return False  # not connected: the send connects
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _can_read(conn):
    """An asyncio connection's check for data waiting (or its end closed): ``can_read`` in
    redis-py 8 (``can_read_destructive``, the older name, warns there on every call)."""
    check = getattr(conn, "can_read", None)
    return check() if check is not None else conn.can_read_destructive()


async def _send(conn, packed):
    """``conn.send_packed_command(packed)`` without its ``asyncio.wait_for``: with a socket
    timeout (a worker's connections have one) that makes a task of every send, two more turns
    of the event loop per call. The command goes into the transport's buffer at once; only a
    send that leaves the buffer over its limit waits for it to drain, under the same timeout.
    A connection of another kind, or not connected yet, is redis-py's to send on."""
    writer = getattr(conn, "_writer", None)
    if writer is None:
        return await conn.send_packed_command(packed)
    if conn.health_check_interval:
        await conn.check_health()
    try:
        writer.writelines(packed)
        transport = writer.transport
        if conn.socket_timeout and transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:
            async with asyncio.timeout(conn.socket_timeout):
                await writer.drain()
        else:
            await writer.drain()  # returns at once, or raises if the connection was lost
    except builtins.TimeoutError:
        await conn.disconnect(nowait=True)
        raise TimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        await conn.disconnect(nowait=True)
        raise ConnectionError(f"Error while writing to socket: {exc}") from exc


class _Road:
    def __init__(self, client):
        self._client = client
        self._pool = client.connection_pool
        self._pack = _packer(self._pool.get_encoder())  # as the client's own encoder packs
        self._held = []
        limit = getattr(self._pool, "max_connections", None)
        self._keep = KEEP if not isinstance(limit, int) else max(0, min(KEEP, limit - 1))
        self._pid = os.getpid()
        self._heads = {}

    def _packed(self, script, fixed, args):
        """The whole command: a head packed once per script and queue (``fixed``: its keys, key
        prefix and queue name), then ``args``."""
        key = (script.name, fixed[-1], len(args))
        head = self._heads.get(key)
        if head is None:
            size = b"*%d\r\n" % (3 + len(fixed) + len(args))
            head = size + self._pack((b"EVALSHA", script.sha, script.numkeys, *fixed))
            if len(self._heads) > 4096:  # queues made on the fly: keep the cache bounded
                self._heads.clear()
            self._heads[key] = head
        return [head + self._pack(args)]

    def _load(self, script):
        """SCRIPT LOAD of ``script``, packed."""
        return [b"*3\r\n" + self._pack((b"SCRIPT", b"LOAD", script.source))]

    def _forked(self):
        if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours
            self._held, self._pid = [], os.getpid()


class Direct(_Road):
    """Script calls for one synchronous client (see the module's docstring)."""

    def run(self, script, fixed, args):
        """Run ``script`` (``scripts.Script``) with its ``fixed`` arguments then ``args`` (as
        ``scripts.run`` does, without replicas to wait for)."""
        packed = self._packed(script, fixed, args)
        try:
            return self._call(packed)
        except ResponseError as exc:
            if not is_noscript(exc):
                raise
        try:
            self._call(self._load(script))
        except (ConnectionError, TimeoutError, OSError) as exc:
            _mark_unsent(exc)  # the call itself was refused (NOSCRIPT) and not sent again
            raise
        return self._call(packed)

    def _call(self, packed):
        self._forked()
        sent = False  # the command was written whole, at least once: Redis may have run it
        try:
            try:
                conn = self._held.pop()  # (threads share the road: pop, never look then pop)
            except IndexError:
                conn = self._pool.get_connection()  # checked by the pool
            else:
                self._ready(conn)
        except (ConnectionError, TimeoutError, OSError) as exc:
            _mark_unsent(exc)
            raise

        def call():
            nonlocal sent
            conn.send_packed_command(packed)
            sent = True
            return conn.read_response()

        try:  # retried on network errors as the client's own commands are (its Retry)
            reply = conn.retry.call_with_retry(call, lambda error: conn.disconnect())
        except ResponseError:  # an error reply, read whole: the connection is fine
            self._put(conn)
            raise
        except BaseException as exc:
            conn.disconnect()
            self._put(conn)
            if not sent and isinstance(exc, (ConnectionError, TimeoutError, OSError)):
                _mark_unsent(exc)
            raise
        self._put(conn)
        return reply

    def _ready(self, conn):
        """The pool's check of a connection it hands out, for a held one: one closed by the
        server (a restart, a kill, a timeout) or with data waiting is connected again before
        anything is sent on it. Anything raised puts it back."""
        try:
            try:
                if _readable(conn):
                    raise ConnectionError("connection has data")
            except (ConnectionError, OSError):
                conn.disconnect()
                conn.connect()
                if conn.can_read():
                    raise ConnectionError("connection not ready") from None
        except BaseException:
            conn.disconnect()
            self._put(conn)
            raise

    def _put(self, conn):
        if len(self._held) < self._keep:
            self._held.append(conn)
        else:
            self._pool.release(conn)


class AsyncDirect(_Road):
    """Script calls for one asyncio client (see the module's docstring)."""

    async def run(self, script, fixed, args):
        """As ``Direct.run``, on an asyncio client."""
        packed = self._packed(script, fixed, args)
        try:
            return await self._call(packed)
        except ResponseError as exc:
            if not is_noscript(exc):
                raise
        await self._call(self._load(script))
        return await self._call(packed)

    async def _call(self, packed):
        self._forked()
        try:
            conn = self._held.pop()
        except IndexError:
            conn = await self._pool.get_connection()  # checked by the pool
        else:
            await self._ready(conn)

        async def call():
            await _send(conn, packed)
            return await conn.read_response()

        async def failed(error):
            await conn.disconnect()

        try:  # retried on network errors as the client's own commands are (its Retry)
            reply = await conn.retry.call_with_retry(call, failed)
        except ResponseError:
            await self._put(conn)
            raise
        except BaseException:
            await conn.disconnect(nowait=True)
            await self._put(conn)
            raise
        await self._put(conn)
        return reply

    async def _ready(self, conn):
        """As ``Direct._ready``."""
        try:
            try:
                if not conn.is_connected:
                    await conn.connect()
                if await _can_read(conn):
                    raise ConnectionError("connection has data")
            except (ConnectionError, TimeoutError, OSError):
                await conn.disconnect()
                await conn.connect()
                if await _can_read(conn):
                    raise ConnectionError("connection not ready") from None
        except BaseException:
            await conn.disconnect(nowait=True)
            await self._put(conn)
            raise

    async def _put(self, conn):
        if len(self._held) < self._keep:
            self._held.append(conn)
        else:
            await self._pool.release(conn)


def _served(client, kinds):
    pools, connections = kinds
    pool = getattr(client, "connection_pool", None)
    return (
        type(pool) in pools
        and pool.connection_class in connections
        and getattr(pool, "cache", None) is None
        and not getattr(client, "worqr_replicas", None)
    )


def for_client(client):
    """The synchronous client's ``Direct``, made on first use; None when it is not one served
    (a cluster, Sentinel, a custom pool or connection class, client-side caching, or writes
    that wait for replicas)."""
    road = getattr(client, "worqr_direct", False)
    if road is False:
        road = Direct(client) if type(client) is redis.Redis and _served(client, _SYNC) else None
        client.worqr_direct = road
    return road


def for_async(client):
    """The asyncio client's ``AsyncDirect`` (as ``for_client``)."""
    road = getattr(client, "worqr_direct", False)
    if road is False:
        road = AsyncDirect(client) if type(client) is redis.asyncio.Redis and _served(client, _ASYNC) else None
        client.worqr_direct = road
    return road
