"""The floor: no job queue at all, only the wake-up an idle consumer gets from Redis.

floor-blpop: the producer LPUSHes the job's timestamp; a synchronous redis-py client waits in
BLPOP (how huey waits, without huey) and calls common.job_done(ts). floor_pubsub_adapter.py is the
same with PUBLISH to an asyncio subscriber. Rows to read the pickup figures against, measured by
the same probe in the same run: they take part in the latency phase only (PHASES), are not
contenders and run no drain. Worker: python -m adapters.floor_adapter
"""
import sys

import redis

import common

DIST = "floor"
VERSION = f"redis-py {redis.__version__}"
VARIANTS = {"floor-blpop": "no queue: LPUSH of the timestamp to a synchronous client waiting in BLPOP"}
LABELS = {"floor-blpop": "floor: BLPOP wake-up"}
BULK = None
PHASES = ("latency",)
KEY = "bench:floor"


class Producer:
    def __init__(self):
        self.r = redis.Redis.from_url(common.REDIS_URL)

    def one(self, payload, ts):
        self.r.lpush(KEY, repr(ts))


def worker_cmds(variant, procs):
    return [[sys.executable, "-m", "adapters.floor_adapter"]] * procs


if __name__ == "__main__":
    r = redis.Redis.from_url(common.REDIS_URL)
    while True:
        _, ts = r.blpop([KEY])
        common.job_done(float(ts))
