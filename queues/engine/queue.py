"""Queue: enqueue tasks and manage them (cancel, retry, delete, pause, drop, purge, read)."""

import hashlib
import logging
import math
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal, Unpack, cast

from . import commands, keys, readmodel, tracing, workflows
from .codes import Code
from .connection import NETWORK_ERRORS, get_default
from .errors import ConfigurationError, InvalidInput, InvalidTask, PayloadTooLarge, TooManyQueues
from .limits import override_args
from .options import EnqueueOptions, Payload, TaskOptions, check_names
from .registry import get_handler
from .sending import Sending
from .task import Task

log = logging.getLogger("worqr")

#: Tasks per enqueue call (each call is atomic), and entries per purge, drop or retry call: so
#: that no script call holds Redis for long (under a few ms each, measured with 300,000 tasks).
_BATCH = 500
#: Where the lock key and the partition key stand in a prepared option list.
_LOCK, _PARTITION = commands.TASK_OPTIONS.index("lock"), commands.TASK_OPTIONS.index("partition")


#: set_limits: an option not given (None means "no limit").
_UNSET = object()


def new_task_id(queue):
    return f"{queue}-{os.urandom(8).hex()}"


def _number(name, value, *, minimum=0.0, strict=False, integer=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "an integer" if integer else "a number"
        raise InvalidTask(f"{name} must be {kind}, not {value!r}")
    if integer and not isinstance(value, int):
        raise InvalidTask(f"{name} must be an integer, not {value!r}")
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise InvalidTask(f"{name} must be {'>' if strict else '>='} {minimum:g}, not {value!r}")
    return value


def _too_large(raw, config):
    raise PayloadTooLarge(
        f"payload of {len(raw)} bytes is over the limit of "
        f"{config.max_payload_bytes} bytes (WORQR['MAX_PAYLOAD_BYTES'])"
    )


class Queue:
    """A named queue. Cheap to create; all state lives in Redis."""

    def __init__(self, name, connection=None):
        self.name = keys.check_queue_name(name)
        self._connection = connection

    def __repr__(self):
        return f"<Queue {self.name}>"

    @property
    def connection(self):
        return self._connection or get_default()

    @property
    def client(self):
        return self.connection.client

    # -- producing -------------------------------------------------------------------------

    def enqueue(self, payload: Payload, **options: Unpack[EnqueueOptions]) -> str:
        """Add one task; returns its id. See ``enqueue_many`` for the options (``options.py``
        names each)."""
        if options or not isinstance(payload, str):
            return self.enqueue_many([payload], **options)[0]
        # The common call (a str payload, no options) runs on every enqueue: the same checks and
        # the same script call as enqueue_many's, without its batching and option handling.
        connection = self._connection or get_default()
        config = connection.config
        raw = payload.encode("utf-8", "surrogateescape")
        if len(raw) > config.max_payload_bytes:
            _too_large(raw, config)
        spec = get_handler(self.name)
        if spec is not None and (spec.lock is not None or spec.limits.partition is not None):
            return self.enqueue_many([payload])[0]  # a lock or partition from the payload: the full path
        task_id = new_task_id(self.name)
        if not tracing.enabled(config):
            return self._enqueue_one(connection, task_id, raw, "")
        with tracing.enqueue_span(self.name, 1) as (span, trace):
            task_id = self._enqueue_one(connection, task_id, raw, trace)
            tracing.enqueued(span, [task_id])
            return task_id

    def _enqueue_one(self, connection, task_id, raw, trace):
        """Send the common call (retried as every enqueue is: ``sending``; a retry after a lost
        reply adds nothing, the task be pending or ended). A queue that does not exist yet takes
        the long way, which checks MAX_QUEUES first."""
        sending = Sending(connection, self.name, [task_id])
        attempt = partial(
            commands.enqueue_one,
            connection.enqueue_client,
            self.name,
            task_id,
            raw,
            trace,
            create=False,
            window=sending.window,
        )
        is_new, given = sending.send(attempt, 1)
        if given is None:  # no such queue (nothing written)
            options = dict.fromkeys(commands.TASK_OPTIONS, "")
            return self._send(sending, "", options, [(task_id, raw, "", "")], trace).ids[0]
        sending.done([given])
        if is_new:
            sending.known()
        return given

    def _check_room(self, client, limit):
        """Before a call that makes the queue: raise TooManyQueues if ``limit`` (MAX_QUEUES)
        queues exist and this is not one of them (one round trip). Queues made at the same moment
        by other producers may each pass: the limit can be passed by as many as are made at once."""
        p = client.pipeline(transaction=False)
        p.sismember(keys.KNOWN_QUEUES, self.name)
        p.scard(keys.KNOWN_QUEUES)
        known, count = p.execute()
        if not known and count >= limit:
            raise TooManyQueues(self.name, limit)

    def enqueue_many(
        self,
        payloads: Iterable[Payload],
        *,
        ids: Iterable[str] | None = None,
        after: Iterable[str] | None = None,
        on_parent_failure: Literal["cancel", "run"] = "cancel",
        **options: Unpack[TaskOptions],
    ) -> list[str]:
        """Add tasks, atomically in steps of 500 (``_BATCH``); returns their ids in order.

        Options: ``delay`` (seconds) or ``eta`` (a datetime) defers them; ``retries``,
        ``timeout`` (s) and ``backoff`` (s) override the handler's defaults; ``lock`` names a lock
        they take while running; ``unique=True`` derives a unique key from each payload (or pass
        the key as a string): while a task with that key is pending or running, enqueueing
        returns its id; ``callback`` (a URL) and ``meta`` (text) are kept with the task.
        ``ids`` gives the tasks' ids (made with ``new_task_id``) instead of fresh ones; an id
        already enqueued (even if its task has finished since, within ``ENQUEUE_DEDUP_FOR``) is
        then not enqueued again.

        Enqueue is idempotent by id: a call whose reply was lost is sent again and adds nothing
        (its tasks be pending, running or ended since). Redis unreachable: retried for
        ``WORQR["ENQUEUE_RETRY_FOR"]`` seconds (2 by default), then ``RedisUnavailable`` is
        raised, within ``ENQUEUE_RETRY_FOR`` + ``ENQUEUE_SOCKET_TIMEOUT``; it lists the ids
        added, those that may have been (no reply came) and those not added (``sending``).

        ``after`` (task ids, of any queues, at most 1,000) makes the tasks ``blocked`` until every
        one of those parents has completed; if a parent ends otherwise (failed for good,
        cancelled, deleted) they are cancelled (``on_parent_failure="cancel"``, the default) or
        run anyway (``"run"``). See ``workflows``.
        """
        check_names(options)  # a misspelt option: InvalidTask naming it, nothing written
        payloads = list(payloads)
        if ids is not None:
            ids = list(ids)
            if len(ids) != len(payloads) or any(keys.queue_from_task_id(i) != self.name for i in ids):
                raise InvalidTask(f"ids must be one task id of queue {self.name!r} per payload")
        own = cast(dict[str, Any], options)  # the same dict: the engine's own options (_batch...) too
        extra = {k: own.pop(k) for k in ("_batch", "_batch_callback", "_once", "_links") if k in own}
        # ids the caller gave are remembered (a second push is a no-op); ids made here are new
        remember = own.pop("_remember", ids is not None)
        parents = workflows.check_after(after, on_parent_failure, ids)
        batches = self._prepare(payloads, **options)
        if batches is None:  # the handler's lock or partition function gave different keys
            grouped = dict(options, after=after, on_parent_failure=on_parent_failure, _remember=remember, **extra)
            return self._enqueue_grouped(payloads, ids, grouped)
        ids = ids if ids is not None else [new_task_id(self.name) for _ in payloads]
        if not parents:
            return self._enqueue(batches, ids, remember=remember, **extra).ids
        # Linked in the parents' queues first (idempotent), under the same retries and deadline.
        sending = Sending(self.connection, self.name, ids)
        client = self.connection.enqueue_client
        deps = sending.send(partial(workflows.link, client, parents, ids, on_parent_failure), 0)
        enqueued = self._enqueue(batches, ids, deps=deps, remember=remember, sending=sending, **extra)
        try:
            workflows.drain(client, self.name)  # tasks cancelled at once: their batch is told
        except NETWORK_ERRORS as exc:  # they are in: the workers' sweep tells it
            log.warning("worqr: queue %s: the batches of tasks cancelled at once are told later: %s", self.name, exc)
        return enqueued.ids

    def _enqueue_grouped(self, payloads, ids, options):
        """Enqueue payloads whose lock or partition keys differ: one call per key, ids in order."""
        spec = get_handler(self.name)
        ids = ids or [new_task_id(self.name) for _ in payloads]
        groups = {}
        for i, payload in enumerate(payloads):
            lock = options.get("lock")
            if lock is None and callable(spec.lock):
                lock = self._lock_of(spec.lock, payload)
            part = self._partition_of(spec.limits.partition, payload) if spec.limits.partition else None
            groups.setdefault((lock, part), []).append(i)
        out = [None] * len(payloads)
        for indexes in groups.values():
            got = self.enqueue_many([payloads[i] for i in indexes], ids=[ids[i] for i in indexes], **options)
            for i, task_id in zip(indexes, got):
                out[i] = task_id
        return out

    def _enqueue(
        self,
        batches,
        ids=None,
        deps="",
        _batch="",
        _batch_callback="",
        _once="",
        _links=None,
        *,
        retry_for=None,
        remember=None,
        sending=None,
        create=False,
    ):
        """Run the checked enqueue; returns ``commands.Enqueued`` (ids, and Redis time). Given
        ``ids`` are remembered (see ``enqueue_many``) unless ``remember=False``; ``retry_for``
        overrides the setting; ``_links``: traceparents its enqueue span links to; ``sending``:
        the ``Sending`` of the enqueue these calls belong to (a new one if None); ``create``: the
        queue is made if need be without checking MAX_QUEUES (``_send``)."""
        when, opts, items = batches
        items = [((ids[i] if ids is not None else new_task_id(self.name)), *rest) for i, rest in enumerate(items)]
        extra = dict(parents=deps, batch=_batch, batch_callback=_batch_callback, once=_once)
        options = dict(zip(commands.TASK_OPTIONS, opts, strict=True))
        remember = ids is not None if remember is None else remember
        if sending is None:
            sending = Sending(self.connection, self.name, [item[0] for item in items], retry_for)
        if not tracing.enabled(self.connection.config):
            return self._send(sending, when, options, items, remember=remember, extra=extra, create=create)
        with tracing.enqueue_span(self.name, len(items), links=_links) as (span, trace):
            enqueued = self._send(sending, when, options, items, trace, remember=remember, extra=extra, create=create)
            tracing.enqueued(span, enqueued.ids)
            return enqueued

    def _send(self, sending, when, options, items, trace="", *, remember=False, extra=None, create=False):
        """Send ``items`` in calls of ``_BATCH`` (``sending``): ``commands.Enqueued`` of them all.
        A call that finds the queue does not exist is made again once MAX_QUEUES was checked
        (``_check_room``; ``create``: without the check, for tasks already accepted: the
        outbox's)."""
        config = self.connection.config
        keep = config.enqueue_dedup_for if remember else 0
        client, now, new = self.connection.enqueue_client, 0, False
        for start in range(0, len(items), _BATCH):
            batch = items[start : start + _BATCH]
            while True:
                call = commands.enqueue(
                    self.name,
                    batch,
                    when=when,
                    trace=trace,
                    remember=keep,
                    window=sending.window,
                    create=create,
                    **options,
                    **(extra or {}),
                )
                reply = sending.send(partial(call.run, client), len(batch))
                if not reply.no_queue:
                    break
                sending.send(partial(self._check_room, client, config.max_queues), len(batch))
                create = True
            sending.done(reply.ids)
            new, now = new or reply.is_new_queue, reply.now_ms
        if new:
            sending.known()
        return commands.Enqueued(new, now, sending.added)

    def validate(self, payloads, *, after=None, on_parent_failure="cancel", **options):
        """Raise what ``enqueue_many`` would raise for these payloads and options; adds nothing."""
        parents = workflows.check_after(after, on_parent_failure, None)
        if parents:
            workflows.check_parents_exist(self.client, parents)
        self._prepare(list(payloads), **options)

    def _prepare(
        self,
        payloads,
        *,
        delay=None,
        eta=None,
        retries=None,
        timeout=None,
        backoff=None,
        lock=None,
        unique=False,
        callback=None,
        meta=None,
        tags=None,
    ):
        """Check everything; returns (when, options, [(payload, unique key, kind)]), or None when
        a handler's lock or partition function puts the payloads under different keys."""
        config = self.connection.config
        when = self._when(delay, eta)
        opts = self._options(retries, timeout, backoff, lock, callback, meta)
        opts.append(keys.check_tags(tags) if tags is not None else [])
        if unique is not True and unique is not False and not isinstance(unique, str):
            raise InvalidTask(f"unique must be True, False or a key string, not {unique!r}")
        if isinstance(unique, str):
            keys.check_lock_key(unique)
        args = []
        for payload in payloads:
            if isinstance(payload, str):
                raw, kind = payload.encode("utf-8", "surrogateescape"), ""
            elif isinstance(payload, (bytes, bytearray, memoryview)):
                raw, kind = bytes(payload), "b"
            else:
                raise InvalidTask(
                    f"payload must be str or bytes, not {type(payload).__name__} "
                    "(payloads are stored raw: serialise it first)"
                )
            if len(raw) > config.max_payload_bytes:
                _too_large(raw, config)
            ukey = hashlib.sha1(raw).hexdigest() if unique is True else (unique or "")
            args.append((raw, ukey, kind))
        spec = get_handler(self.name)
        if lock is None and spec is not None and spec.lock is not None:
            if isinstance(spec.lock, str):
                opts[_LOCK] = keys.check_lock_key(spec.lock)
            elif payloads:
                locks = {keys.check_lock_key(self._lock_of(spec.lock, p)) for p in payloads}
                if len(locks) > 1:
                    return None
                opts[_LOCK] = locks.pop()
        if spec is not None and spec.limits.partition is not None and payloads:
            parts = {self._partition_of(spec.limits.partition, p) for p in payloads}
            if len(parts) > 1:
                return None
            opts[_PARTITION] = parts.pop()
        return when, opts, args

    @staticmethod
    def _lock_of(lock_fn, payload):
        probe = Task(id="", queue="", payload=payload, state="pending")
        key = lock_fn(probe)
        if not isinstance(key, str):
            raise InvalidTask(f"the handler's lock function returned {key!r}, not a string")
        return key

    def _partition_of(self, partition_fn, payload):
        """The partition key the handler's function gives a task of ``payload``: InvalidTask
        naming the queue if it raises or gives anything but a string of 1 to 200 characters."""
        probe = Task(id="", queue=self.name, payload=payload, state="pending")
        try:
            key = partition_fn(probe)
        except Exception as exc:
            raise InvalidTask(
                f"queue {self.name!r}: the handler's partition function raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(key, str) or not key or len(key) > keys.LOCK_KEY_MAX:
            raise InvalidTask(
                f"queue {self.name!r}: the handler's partition function returned {key!r}, "
                f"not a string of 1 to {keys.LOCK_KEY_MAX} characters"
            )
        return key

    @staticmethod
    def _when(delay, eta):
        if delay is not None and eta is not None:
            raise InvalidTask("give delay or eta, not both")
        if delay is not None:
            _number("delay", delay)
            return f"+{int(delay * 1000)}" if delay > 0 else ""
        if eta is not None:
            if not isinstance(eta, datetime):
                raise InvalidTask(f"eta must be a datetime, not {eta!r}")
            if eta.tzinfo is None:
                eta = eta.replace(tzinfo=UTC)
            return f"@{int(eta.timestamp() * 1000)}"
        return ""

    @staticmethod
    def _options(retries, timeout, backoff, lock, callback, meta):
        """The task options but tags, as text ('' when not given), in ``commands.TASK_OPTIONS``'s order."""
        out = [""] * (len(commands.TASK_OPTIONS) - 1)
        if retries is not None:
            out[0] = str(_number("retries", retries, integer=True))
        if timeout is not None:
            out[1] = repr(float(_number("timeout", timeout, strict=True)))
        if backoff is not None:
            out[2] = repr(float(_number("backoff", backoff)))
        if lock is not None:
            out[3] = keys.check_lock_key(lock)
        if callback is not None:
            if not isinstance(callback, str) or not callback or len(callback) > 2048:
                raise InvalidTask("callback must be a URL of at most 2048 characters")
            out[4] = callback
        if meta is not None:
            if not isinstance(meta, str):
                raise InvalidTask("meta must be a string")
            out[5] = meta
        return out

    # -- reading ---------------------------------------------------------------------------

    def _check_id(self, task_id):
        if keys.queue_from_task_id(task_id) != self.name:
            raise InvalidInput(f"{task_id!r} is not a task id of queue {self.name!r}")
        return task_id

    def get(self, task_id):
        """The task, or None once it is finished (or never existed)."""
        return readmodel.task(self.client, self._check_id(task_id))

    def counts(self):
        """Tasks per state and the queue's counters, read atomically."""
        return readmodel.queue_counts(self.client, self.name)

    def failures(self, limit=100):
        """The newest failures first: id, payload, error, traceback, attempts, worker, failed_at."""
        return readmodel.failures(self.client, self.name, limit=limit)

    def is_paused(self):
        return readmodel.is_paused(self.client, self.name)

    def limits(self):
        """The queue's limits and their current use: ``concurrency``, ``rate`` ([starts, seconds]),
        ``partition_concurrency``, ``partition_rate`` (None: no limit), ``handler`` and
        ``overrides`` (where they come from), ``active`` (slots in use, ``kept`` ones included),
        ``kept``, ``starts_in_window``, ``held_back``, ``runnable`` and ``partitions`` (README
        "Limits")."""
        return readmodel.limits(self.client, self.name)

    def set_limits(
        self,
        *,
        concurrency=_UNSET,
        rate=_UNSET,
        partition_concurrency=_UNSET,
        partition_rate=_UNSET,
        reset=False,
    ):
        """Override the handler's limits, durably and for every worker at once (their next start
        obeys): each option given is a value, or None for "no limit"; those not given keep their
        override if any. ``reset=True`` drops every override first (back to the handler's values),
        then sets those given. Returns ``limits()``. A bad value raises InvalidInput naming the
        queue and option, and changes nothing."""
        given = {
            "concurrency": concurrency,
            "rate": rate,
            "partition_concurrency": partition_concurrency,
            "partition_rate": partition_rate,
        }
        given = {k: v for k, v in given.items() if v is not _UNSET}
        if reset is not True and reset is not False:
            raise InvalidInput(f"queue {self.name!r}: reset must be True or False, not {reset!r}")
        if not given and not reset:
            raise InvalidInput(f"queue {self.name!r}: set_limits needs a limit to set, or reset=True")
        try:
            args = override_args(self.name, given)
        except ConfigurationError as exc:
            raise InvalidInput(str(exc).replace("handler ", "queue ", 1)) from None
        commands.set_limits(self.name, args, reset=reset).run(self.client)
        self.client.sadd(keys.KNOWN_QUEUES, self.name)
        return self.limits()

    # -- managing --------------------------------------------------------------------------

    def cancel(self, task_id):
        """Cancel a task: True if it was pending, delayed, waiting (removed) or active (its worker
        is told to stop it); False if unknown. A failed or completed task raises InvalidState."""
        return self.cancel_outcome(task_id) is not None

    def cancel_outcome(self, task_id):
        """Cancel a task and say what that did: ``"removed"`` (it had not started and never will),
        ``"stopping"`` (it was running: its worker is told to stop it), or None (no such task).
        A failed or completed task raises InvalidState."""
        code = commands.cancel(self.name, self._check_id(task_id)).run(self.client)
        if code == Code.UNKNOWN:
            return None
        commands.check(code, "cancel", self.name, task_id)
        if code == Code.REMOVED:
            workflows.drain(self.client, self.name)
        return "stopping" if code == Code.STOPPING else "removed"

    def retry(self, task_id):
        """Put a failed task back at the tail of the queue with its attempts reset."""
        code = commands.retry(self.name, [self._check_id(task_id)]).run(self.client)[0]
        commands.check(code, "retry", self.name, task_id)
        return True

    def retry_all(self):
        """Retry every failed task; returns how many."""
        total = 0
        while ids := readmodel.failed_ids(self.client, self.name, _BATCH):
            total += sum(1 for c in commands.retry(self.name, ids).run(self.client) if c == Code.REQUEUED)
        return total

    def delete(self, task_id, finished_only=False):
        """Delete a task in any state but active; ``finished_only``: only a failed or completed
        one (a task that has not run raises InvalidState: removing it is a cancel)."""
        code = commands.delete(self.name, [self._check_id(task_id)], finished_only).run(self.client)[0]
        commands.check(code, "delete", self.name, task_id)
        workflows.drain(self.client, self.name)
        return True

    def pause(self):
        """Stop starting tasks (enqueues are still accepted); durable, seen by every worker at once."""
        changed = commands.pause(self.name, True).run(self.client)
        self.client.sadd(keys.KNOWN_QUEUES, self.name)
        return changed

    def resume(self):
        return commands.pause(self.name, False).run(self.client)

    def purge(self):
        """Delete every task waiting to run (pending, and waiting for a lock); returns how many.
        Delayed, active and failed tasks stay."""
        total, more = 0, True
        while more:
            deleted, more = commands.purge(self.name, _BATCH).run(self.client)
            total += deleted
        workflows.drain_all(self.client, self.name)
        return total

    def drop(self):
        """Delete the queue: every task and key, counters and the operator's limits included;
        running tasks are stopped. A handler that runs on (a sync one can't be stopped) keeps its
        lock and its slots under the limits until it returns, as a cancelled one does. The workers
        serving the queue stay registered (with their handlers' limits); with none, nothing of
        the queue is left. The children (``after=``) and batches of its tasks, in other queues,
        are told they were deleted, after each step of ``_BATCH`` tasks."""
        while commands.drop(self.name, _BATCH).run(self.client):
            workflows.drain_all(self.client, self.name, dropping=True)
        self.client.delete(keys.queue_key(self.name, "depth"))  # samples taken from Python
        if not self.client.exists(keys.queue_key(self.name, "workers")):  # served: still listed
            self.client.srem(keys.KNOWN_QUEUES, self.name)
