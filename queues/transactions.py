"""Transactional enqueue: ``Queue.enqueue(..., on_commit=True)``.

The engine knows nothing of databases, so this Django-aware ``Queue`` (the one ``queues.Queue``
names) adds one option to ``enqueue`` and ``enqueue_many``:

1. ``on_commit=False`` (the default), or no transaction open on ``using``: enqueue now.
2. ``on_commit=True`` inside ``transaction.atomic()``: check the payloads and options now, make
   the task ids now, and enqueue with exactly those ids from ``transaction.on_commit``. A
   rollback (of the transaction, or of the savepoint the call was made in) drops the enqueue,
   so no task ever runs against rows that were never committed.

Ids before commit: the engine makes its own ids inside ``enqueue_many``. Until it accepts ids
from the caller, ``_enqueue_with_ids`` swaps the ids it generated for ours in the arguments of
the ``enqueue`` script (the last ``n`` quadruples start with the id), checking that every slot
it overwrites really holds a fresh id of this queue, so a change of the script's arguments fails
loudly instead of corrupting a payload.

Limits: ``unique`` cannot be combined with a deferred enqueue (the id is promised before it is
known whether a holder of the unique key exists at commit); and a process that dies between the
commit and the enqueue loses the enqueue (at most once; an outbox table would close that gap).
"""

import logging

from django.db import DEFAULT_DB_ALIAS, transaction

from .engine import keys
from .engine import queue as engine_queue
from .engine.errors import InvalidTask, PayloadTooLarge

log = logging.getLogger("worqr")


def in_transaction(using=None):
    """True inside ``transaction.atomic()`` on the database ``using`` (default: the default one)."""
    return transaction.get_connection(using or DEFAULT_DB_ALIAS).in_atomic_block


class Queue(engine_queue.Queue):
    """The engine's Queue, plus ``on_commit=True`` on ``enqueue`` and ``enqueue_many``."""

    _given_ids = None

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
        transaction.on_commit(lambda: self._enqueue_with_ids(payloads, ids, options), using=using)
        return ids

    def check_enqueue(self, payloads, *, delay=None, eta=None, retries=None, timeout=None, backoff=None,
              lock=None, unique=False, callback=None, meta=None):
        """Raise what ``enqueue_many`` would raise for these payloads and options, adding nothing.

        Lets a deferred enqueue fail at the call, not at commit. Lock functions of handlers are
        only run at commit.
        """
        limit = self.connection.config.max_payload_bytes
        for payload in payloads:
            if isinstance(payload, str):
                size = len(payload.encode("utf-8", "surrogateescape"))
            elif isinstance(payload, (bytes, bytearray, memoryview)):
                size = len(bytes(payload))
            else:
                raise InvalidTask(
                    f"payload must be str or bytes, not {type(payload).__name__} "
                    "(payloads are stored raw: serialise it first)"
                )
            if size > limit:
                raise PayloadTooLarge(
                    f"payload of {size} bytes is over the limit of {limit} bytes (WORQR['MAX_PAYLOAD_BYTES'])"
                )
        # Side-effect free checks of the engine's own; skipped if the engine renames them.
        when, options = getattr(self, "_when", None), getattr(self, "_options", None)
        if when is not None and options is not None:
            when(delay, eta)
            options(retries, timeout, backoff, lock, callback, meta)

    def _enqueue_with_ids(self, payloads, ids, options):
        """Enqueue ``payloads`` now, as tasks with the given ``ids``; returns the ids."""
        q = type(self)(self.name, self._connection)
        q._given_ids = list(ids)
        got = engine_queue.Queue.enqueue_many(q, payloads, **options)
        if got != list(ids):  # only possible if the engine stops going through _run
            log.error("worqr: queue %s: tasks enqueued as %s, not the promised %s", self.name, got, ids)
        return got

    def _run(self, script, *args):
        if script == "enqueue" and self._given_ids:
            args = list(args)
            n = int(args[0])
            for i in range(len(args) - 4 * n, len(args), 4):
                if keys.queue_from_task_id(args[i]) != self.name:
                    raise RuntimeError(
                        f"queue {self.name}: the engine's enqueue arguments changed; "
                        "transactional enqueue needs updating"
                    )
                args[i] = self._given_ids.pop(0)
        return super()._run(script, *args)
