"""A script call (``Call``: run it on a synchronous or an asyncio client), several in one round
trip, and the typed errors of reply codes."""

from dataclasses import dataclass, field

from .. import scripts
from ..codes import Code
from ..errors import InvalidState, NotFinished, NotReplicated, StaleLease, TaskNotFound, WorkerLost


def _ms(seconds):
    return int(seconds * 1000)


@dataclass(frozen=True)
class Call:
    """One script call, ready to run on a client."""

    script: str
    queue: str
    args: tuple
    parse: object = field(default=None, compare=False)
    #: A write that must reach ``MIN_REPLICAS_ACK`` replicas: ``strict`` (raise NotReplicated
    #: if it did not) or ``log`` (log it); None for the others (``scripts.run``).
    durable: str = None

    def run(self, client):
        try:
            reply = scripts.run(client, self.script, self.queue, *self.args, durable=self.durable)
        except NotReplicated as exc:
            exc.reply = self.parse(exc.reply) if self.parse else exc.reply
            if getattr(exc.reply, "no_queue", False):  # nothing was written: nothing to lose
                return exc.reply
            raise
        return self.parse(reply) if self.parse else reply

    async def arun(self, client):
        reply = await scripts.arun(client, self.script, self.queue, *self.args, durable=self.durable)
        return self.parse(reply) if self.parse else reply


def run_pipelined(client, calls):
    """Run several ``Call``s in one round trip (``scripts.run_pipelined``: on a Redis Cluster, one
    pipeline per master); returns their parsed replies in order. No wait for replicas: a
    ``durable`` call's replies are not checked against ``MIN_REPLICAS_ACK`` here."""
    calls = list(calls)
    replies = scripts.run_pipelined(client, [(c.script, c.queue, c.args) for c in calls])
    return [c.parse(r) if c.parse else r for c, r in zip(calls, replies)]


def _codes(reply):
    return [Code(c) for c in reply]


def _code(reply):
    return Code(reply)


# -- errors ----------------------------------------------------------------------------------

_MESSAGES = {
    Code.STALE: (StaleLease, "its lease is stale (the task was taken back and handed to another worker)"),
    Code.UNKNOWN: (TaskNotFound, "there is no such task (it never existed, or it has finished)"),
    Code.ACTIVE: (InvalidState, "it is running: cancel it instead"),
    Code.NOT_FAILED: (InvalidState, "it is not failed"),
    Code.NOT_DELAYED: (InvalidState, "it is not delayed (it may have become due, or been cancelled)"),
    Code.FINISHED: (InvalidState, "it has already failed or completed: delete it instead"),
    Code.NOT_REGISTERED: (WorkerLost, "the worker is not registered (it was presumed dead)"),
    Code.NOT_FINISHED: (NotFinished, "it has not run yet (pending, delayed, waiting or blocked): cancel it instead"),
}


def error_for(code, script, queue, task_id=None):
    """The typed error for a negative reply ``code`` of ``script``, naming the task and queue."""
    kind, why = _MESSAGES[Code(code)]
    subject = f"task {task_id} of queue {queue}" if task_id else f"queue {queue}"
    return kind(f"{script}: {subject}: {why}")


def check(code, script, queue, task_id=None):
    """Return ``code`` if it is not an error code, else raise its error."""
    if code < 0:
        raise error_for(code, script, queue, task_id)
    return Code(code)


def _traces(items, i):
    """The optional trailing traceparents of a call: item[i] of each item ('' for an item
    without), or () when no item has one (tracing off: the call is as it was)."""
    if not any(len(item) > i and item[i] for item in items):
        return ()
    return tuple(item[i] if len(item) > i else "" for item in items)
