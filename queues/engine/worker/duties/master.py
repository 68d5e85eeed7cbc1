"""Through Sentinel with MIN_REPLICAS_ACK, ask the Sentinels where the master is, for the
worker's clients (its pool's and its heartbeat's). After a SENTINEL FAILOVER the old master keeps
serving, and taking this worker's heartbeats, until it is demoted, up to 10 s later, while
producers, refused there for want of replicas, move to the new one: without asking, workers stay
on the old master and run what is enqueued there. (The Sentinels take a second each to give up
when they are cut off.)"""

from ... import scripts


class MasterCheck:
    what = "master check"

    def __init__(self, redis, config):
        self.redis, self.config = redis, config

    async def run(self, beat_client):
        if self.config.min_replicas_ack > 0:
            await scripts.arecheck_master(self.redis)
            await scripts.arecheck_master(beat_client)
