"""How fast an idle consumer learns of a message: issue 19's question of how an idle worker
should hear of a task (README, "Performance, round four").

A producer sends its ``time.time()`` every 20 ms; a consumer in its own process records how
long each took to reach it, three ways, in alternate rounds:

- ``pubsub``: ``PUBLISH`` to an asyncio client subscribed to the channel (how worqr's workers
  hear of work);
- ``blpop``: ``LPUSH`` to an asyncio client blocked in ``BLPOP``;
- ``blpop-sync``: ``LPUSH`` to a synchronous client blocked in ``BLPOP`` (huey's way).

Run with the project's interpreter against a Redis of your own (it writes the key and channel
``wake``)::

    .venv/bin/python bench/wake.py --url redis://127.0.0.1:6391/0 [--n 300] [--rounds 3]
"""

import argparse
import asyncio
import multiprocessing
import time

import redis
import redis.asyncio

KINDS = ("pubsub", "blpop", "blpop-sync")


async def _consume_async(url, kind, n, q):
    r = redis.asyncio.Redis.from_url(url)
    lat = []
    if kind == "pubsub":
        ps = r.pubsub()
        await ps.subscribe("wake")
        q.put("ready")
        while len(lat) < n:
            m = await ps.get_message(timeout=None)
            if m and m["type"] == "message":
                lat.append(time.time() - float(m["data"]))
    else:
        q.put("ready")
        while len(lat) < n:
            _, v = await r.blpop("wake", 0)
            lat.append(time.time() - float(v))
    await r.aclose()
    q.put(lat)


def _consumer(url, kind, n, q):
    if kind != "blpop-sync":
        asyncio.run(_consume_async(url, kind, n, q))
        return
    r = redis.Redis.from_url(url)
    lat = []
    q.put("ready")
    while len(lat) < n:
        _, v = r.blpop("wake", 0)
        lat.append(time.time() - float(v))
    q.put(lat)


def probe(url, kind, n):
    """(p50, p99) in ms of ``n`` messages sent 20 ms apart."""
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=_consumer, args=(url, kind, n, q))
    p.start()
    if q.get(timeout=30) != "ready":
        raise RuntimeError("the consumer did not start")
    time.sleep(0.3)  # its subscription or BLPOP is in place
    r = redis.Redis.from_url(url)
    r.delete("wake")
    for _ in range(n):
        time.sleep(0.02)
        stamp = repr(time.time())
        if kind == "pubsub":
            r.publish("wake", stamp)
        else:
            r.lpush("wake", stamp)
    lat = sorted(q.get(timeout=60))
    p.join(10)
    return lat[len(lat) // 2] * 1000, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--n", type=int, default=300, help="messages per probe (300)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three probes (3)")
    a = ap.parse_args()
    if a.n < 2 or a.rounds < 1:
        ap.error("--n must be at least 2 and --rounds at least 1")
    for rnd in range(a.rounds):
        for kind in KINDS:
            p50, p99 = probe(a.url, kind, a.n)
            print(f"round {rnd + 1} {kind:10s} p50 {p50:.3f} ms  p99 {p99:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
