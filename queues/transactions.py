"""Transactional enqueue: ``Queue.enqueue(..., on_commit=True)``.

The engine knows nothing of databases, so this Django-aware ``Queue`` (the one ``queues.Queue``
names) adds one option to ``enqueue`` and ``enqueue_many``:

1. ``on_commit=False`` (the default), or no transaction open on ``using``: enqueue now.
2. ``on_commit=True`` inside ``transaction.atomic()``: check the payloads and options now, make
   the task ids now, and enqueue with exactly those ids from ``transaction.on_commit``. A
   rollback (of the transaction, or of the savepoint the call was made in) drops the enqueue,
   so no task ever runs against rows that were never committed.

Ids before commit: the ids are made at the call with ``new_task_id`` and handed to the
engine's ``enqueue_many(ids=...)`` at commit, so the id returned is the id the task gets.

Limits: ``unique`` cannot be combined with a deferred enqueue (the id is promised before it is
known whether a holder of the unique key exists at commit); and a process that dies between the
commit and the enqueue loses the enqueue (at most once; an outbox table would close that gap).
"""

from django.db import DEFAULT_DB_ALIAS, transaction

from .engine import queue as engine_queue
from .engine import tracing
from .engine.errors import InvalidTask


def in_transaction(using=None):
    """True inside ``transaction.atomic()`` on the database ``using`` (default: the default one)."""
    return transaction.get_connection(using or DEFAULT_DB_ALIAS).in_atomic_block


class Queue(engine_queue.Queue):
    """The engine's Queue, plus ``on_commit=True`` on ``enqueue`` and ``enqueue_many``."""

    def enqueue(self, payload, *, on_commit=False, using=None, **options):
        """Add one task; returns its id. With ``on_commit=True`` inside a transaction the task is
        added when the transaction commits, and never if it rolls back (the id is returned now)."""
        return self.enqueue_many([payload], on_commit=on_commit, using=using, **options)[0]

    def enqueue_many(self, payloads, *, on_commit=False, using=None, **options):
        """The engine's ``enqueue_many`` with ``on_commit`` (see ``enqueue``)."""
        payloads = list(payloads)
        if not on_commit or not in_transaction(using):
            return super().enqueue_many(payloads, **options)
        if options.get("unique"):
            raise InvalidTask(
                f"queue {self.name}: unique cannot be combined with on_commit inside a "
                "transaction (the task id is returned before commit); enqueue after commit instead"
            )
        self.check_enqueue(payloads, **options)
        ids = [engine_queue.new_task_id(self.name) for _ in payloads]
        ctx = tracing.current()  # the enqueue span goes where the call was made, not the commit

        def send():
            with tracing.attached(ctx):
                self._enqueue_with_ids(payloads, ids, options)

        transaction.on_commit(send, using=using)
        return ids

    def check_enqueue(self, payloads, **options):
        """Raise what ``enqueue_many`` would raise for these payloads and options, adding nothing
        (so a deferred enqueue fails at the call, not at commit)."""
        self.validate(payloads, **options)

    def _enqueue_with_ids(self, payloads, ids, options):
        """Enqueue ``payloads`` now, as tasks with the given ``ids``; returns the ids."""
        return engine_queue.Queue.enqueue_many(self, payloads, ids=ids, **options)
