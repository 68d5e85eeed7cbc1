"""The engine's asyncio clients (``Connection.async_client``) against a real Redis: a command
after the server closed the connection while it was idle goes through on a new one, and a
cancellation that lands while a command is under way is raised even when the command completed."""

import asyncio
import random

import pytest
import redis
import redis.asyncio

from queues.engine.connection import Connection


def _run(coro):
    return asyncio.run(coro)


def test_a_command_after_the_server_closed_an_idle_connection_goes_through(client, _engine):
    """Each asyncio client (the worker's, the heartbeat's) sends GET, a pipeline and SET after CLIENT KILL of its ..."""
    # ... idle connection, 20 times: none fails. (redis-py 8's pool skipped its check of a pooled connection while
    # maintenance notifications answer "auto": every one of these failed with "Connection closed by server".)

    async def rounds(r):
        failed = []
        for i in range(20):
            own = await r.client_id()
            client.client_kill_filter(_id=own)
            await asyncio.sleep(0.01)  # the close reaches the client
            try:
                if i % 3 == 0:
                    await r.get("x")
                elif i % 3 == 1:
                    async with r.pipeline(transaction=False) as p:
                        await p.get("x").set("y", i).execute()
                else:
                    await r.set("x", i, px=5000, xx=False)
            except Exception as exc:
                failed.append(f"round {i}: {exc!r}")
        await r.aclose()
        return failed

    conn = Connection(_engine.url)
    assert _run(rounds(conn.async_client(max_connections=4))) == []
    assert _run(rounds(conn.async_client(max_connections=2, timeout=1.0))) == []


def test_a_cancel_that_lands_while_a_command_completes_is_raised(_engine):
    """A loop of SET and a pipeline, cancelled at a random moment 300 times, ends with CancelledError every time."""
    # On Python 3.11 redis-py writes a command under asyncio.wait_for, which swallowed a cancel landing as the write
    # completed: the command returned normally and the loop, asked to stop, went on (a worker's stop waited 5 s for
    # its heartbeat); 293 of 300 cancels were lost so.

    async def main():
        r = Connection(_engine.url).async_client(max_connections=2)
        lost = 0
        for _ in range(300):

            async def loop():
                while True:
                    await r.set("k", "v", px=3000)
                    async with r.pipeline(transaction=False) as p:
                        await p.get("k").execute()

            task = asyncio.ensure_future(loop())
            await asyncio.sleep(random.uniform(0, 0.003))
            task.cancel()
            await asyncio.wait({task}, timeout=0.5)
            if not task.done():  # the cancel was lost: the loop goes on
                lost += 1
                while not task.done():
                    task.cancel()
                    await asyncio.wait({task}, timeout=0.1)
                if lost >= 5:
                    break
        await r.aclose()
        return lost

    assert _run(main()) == 0


def test_an_asyncio_client_sends_what_redis_py_would_and_refuses_what_it_refuses(client, _engine):
    """Packed with hiredis: each argument stored as redis-py encodes it, a bool refused with redis-py's DataError."""
    payloads = ["é" * 40, b"\x00\xff" * 3000, 10**18, 2.5, "", b"", "x y"]

    async def go(r):
        for value in payloads:
            await r.rpush("packed", value)
        assert await r.execute_command("CONFIG GET", "maxmemory")  # a name carrying an argument
        with pytest.raises(redis.exceptions.DataError):
            await r.set("packed-bool", True)
        await r.aclose()

    r = Connection(_engine.url).async_client()
    assert r.connection_pool.connection_class.__name__.startswith("Hiredis")
    _run(go(r))
    encoder = redis.asyncio.Connection().encoder
    assert client.lrange("packed", 0, -1) == [encoder.encode(v) for v in payloads]
    assert client.get("packed-bool") is None


def test_more_sync_handlers_than_redis_py_pools_hold_use_the_worker_s_client_at_once(client, workers):
    """120 sync handlers each in a Redis call on the worker's own client at once: none fails (redis-py caps pools at 100)."""
    from queues import Queue
    from tests.conftest import wait_for

    n = 120
    q = Queue("pool-gate")
    q.enqueue_many(["x"] * n)
    workers(["pool-gate"], concurrency=n, name="pool-gate-w")
    wait_for(lambda: client.info("clients")["blocked_clients"] >= n, timeout=60, message=f"{n} handlers in BLPOP")
    client.rpush("test:gate", *["go"] * n)
    counts = wait_for(lambda: (c := q.counts())["completed"] + c["failed"] >= n and c, timeout=60, message="the tasks")
    assert counts["completed"] == n and counts["failed"] == 0, counts
