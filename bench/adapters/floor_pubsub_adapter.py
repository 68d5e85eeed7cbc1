"""The floor, pub/sub: the producer PUBLISHes the job's timestamp to an asyncio client subscribed
to the channel (how an idle worqr worker hears of work), which awaits common.job_done_async.
See floor_adapter.py. Worker: python -m adapters.floor_pubsub_adapter
"""
import asyncio
import sys
import time

import redis
import redis.asyncio

import common

DIST = "floor"
VERSION = f"redis-py {redis.__version__}"
VARIANTS = {"floor-pubsub": "no queue: PUBLISH of the timestamp to an asyncio client subscribed to the channel"}
LABELS = {"floor-pubsub": "floor: pub/sub to a loop"}
BULK = None
PHASES = ("latency",)
CHANNEL = "bench:floor"


class Producer:
    def __init__(self):
        self.r = redis.Redis.from_url(common.REDIS_URL)

    def one(self, payload, ts):
        # A message published before the subscriber is in place is lost: the first one (the
        # probe's start-up wait, not recorded) is published again, with a fresh time, until heard.
        while not self.r.publish(CHANNEL, repr(ts)):
            time.sleep(0.05)
            ts = time.time()


def worker_cmds(variant, procs):
    return [[sys.executable, "-m", "adapters.floor_pubsub_adapter"]] * procs


async def consume():
    client = redis.asyncio.Redis.from_url(common.REDIS_URL)
    pubsub = client.pubsub()
    await pubsub.subscribe(CHANNEL)
    while True:
        message = await pubsub.get_message(timeout=None)
        if message and message["type"] == "message":
            await common.job_done_async(client, float(message["data"]))


if __name__ == "__main__":
    asyncio.run(consume())
