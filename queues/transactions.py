"""Transactional enqueue: ``Queue.enqueue(..., on_commit=True)``, and ``durable=True``.

The engine knows nothing of databases, so this Django-aware ``Queue`` (the one ``queues.Queue``
names) adds two options to ``enqueue`` and ``enqueue_many``:

1. ``on_commit=False`` (the default), or no transaction open on ``using``: enqueue now. Redis
   unreachable: retried for ``WORQR["ENQUEUE_RETRY_FOR"]`` s, then ``RedisUnavailable``.
2. ``on_commit=True`` inside ``transaction.atomic()``: the tasks are written to the outbox table
   in the caller's transaction (``queues.outbox``), and pushed to Redis right after the commit.
   A rollback (of the transaction, or of the savepoint the call was made in) removes them. A
   process that dies after the commit, or a Redis that is down, leaves the rows to the workers'
   relay: a task is enqueued if and only if its transaction committed.
3. ``durable=True`` outside a transaction: the same outbox, written at once: the call returns the
   ids even while Redis is unreachable (the relay pushes them once it is back).

Ids before commit: the ids are made at the call with ``new_task_id`` and pushed with exactly
those ids, so the id returned is the id the task gets; pushing is idempotent by id.

``WORQR["MAX_QUEUES"]`` is checked at the call (TooManyQueues, nothing written), when Redis can
be asked; a task in the outbox was accepted, and is pushed even if its queue is new by then.

Limits: ``unique`` cannot be combined with the outbox (the id is promised before it is known
whether a holder of the unique key exists at commit), nor can ``after=`` (its parents are
linked in Redis at the call; a parent enqueued in the same transaction is not there yet):
both raise ``InvalidInput`` before anything is written.
"""

from collections.abc import Iterable
from typing import Unpack

from django.db import DEFAULT_DB_ALIAS, transaction

from . import outbox
from .engine import enqueueing, linking, tracing
from .engine import queue as engine_queue
from .engine.connection import NETWORK_ERRORS
from .engine.errors import InvalidInput, InvalidTask, RedisUnavailable
from .engine.options import EnqueueOptions, ManyOptions, Payload, check_names, refuse_controls


def in_transaction(using=None):
    """True inside ``transaction.atomic()`` on the database ``using`` (default: the default one)."""
    return transaction.get_connection(using or DEFAULT_DB_ALIAS).in_atomic_block


class Queue(engine_queue.Queue):
    """The engine's Queue, plus ``on_commit=True`` and ``durable=True`` on ``enqueue`` and
    ``enqueue_many``."""

    def enqueue(
        self,
        payload: Payload,
        *,
        on_commit: bool = False,
        durable: bool = False,
        using: str | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> str:
        """Add one task; returns its id. With ``on_commit=True`` inside a transaction the task is
        added when the transaction commits, and never if it rolls back (the id is returned now);
        ``durable=True`` keeps it in the outbox while Redis is unreachable."""
        if not durable and not (on_commit and in_transaction(using)):
            return super().enqueue(payload, **options)  # the engine's (its short road for a plain call)
        return self.enqueue_many([payload], on_commit=on_commit, durable=durable, using=using, **options)[0]

    def enqueue_many(
        self,
        payloads: Iterable[Payload],
        *,
        on_commit: bool = False,
        durable: bool = False,
        using: str | None = None,
        **options: Unpack[ManyOptions],
    ) -> list[str]:
        """The engine's ``enqueue_many`` with ``on_commit`` and ``durable`` (see ``enqueue``)."""
        check_names(options)  # a misspelt option: InvalidTask naming it, on every road below
        payloads = list(payloads)
        deferred = on_commit and in_transaction(using)
        if durable and not on_commit and in_transaction(using):
            raise InvalidTask(
                f"queue {self.name}: durable=True inside a transaction needs on_commit=True (the outbox "
                "row is part of the transaction: the task is enqueued when it commits)"
            )
        if not deferred and not durable:
            return super().enqueue_many(payloads, **options)
        after, on_parent_failure = options.pop("after", None), options.pop("on_parent_failure", "cancel")
        if linking.check_after(after, on_parent_failure, None):
            raise InvalidInput(
                f"queue {self.name}: after= cannot be combined with on_commit=True inside a transaction or "
                "durable=True (its parents are linked in Redis at the call, the task is written at commit); "
                "enqueue it after the commit instead: transaction.on_commit(lambda: queue.enqueue(..., after=[...]))"
            )
        refuse_controls(options, "on_commit=True inside a transaction or durable=True (the outbox's tasks)")
        if options.get("unique"):
            raise InvalidTask(
                f"queue {self.name}: unique cannot be combined with on_commit inside a transaction or "
                "durable (the task id is returned before it is known); enqueue after commit instead"
            )
        items = outbox.entries(self, payloads, [enqueueing.new_task_id(self.name) for _ in payloads], options)
        if not outbox.redis_down():
            try:  # MAX_QUEUES, checked now: once committed, a task is pushed even into a new queue
                enqueueing.check_room(self.connection.enqueue_client, self.name, self.connection.config.max_queues)
            except NETWORK_ERRORS:
                pass  # Redis away: the outbox is for that; its tasks are pushed when it is back
        return self.through_outbox(items, using)

    def through_outbox(self, items, using=None, after=None):
        """Write outbox entries in the transaction open on ``using`` (or at once), and push them
        after the commit (or at once); ``after(enqueued)`` is called once they are in Redis.
        Returns their ids. A push that fails leaves the rows to the workers' relay."""
        outbox.store(using, self.name, items)
        ctx = tracing.current()  # the enqueue span goes where the call was made, not the commit

        def send():
            if outbox.redis_down():  # a push just failed: leave these to the relay, at once
                return
            with tracing.attached(ctx):
                try:
                    enqueued = outbox.push(self, items, using, background=True)
                except (RedisUnavailable, *NETWORK_ERRORS) as exc:
                    outbox.pushes_failed(self.name, len(items), exc)
                    return
            if after is not None:
                after(enqueued)

        if in_transaction(using):
            transaction.on_commit(send, using=using)
        else:
            send()
        return [e.task_id for e in items]

    def check_enqueue(self, payloads, **options):
        """Raise what ``enqueue_many`` would raise for these payloads and options, adding nothing
        (so a deferred enqueue fails at the call, not at commit)."""
        self.validate(payloads, **options)
