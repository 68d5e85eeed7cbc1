"""Queue: enqueue tasks and manage them (cancel, retry, delete, pause, drop, purge, read)."""

import hashlib
import math
import os
import time
from datetime import UTC, datetime

from . import commands, keys, readmodel, tracing
from .codes import Code
from .connection import NETWORK_ERRORS, get_default
from .errors import InvalidInput, InvalidTask, PayloadTooLarge, RedisUnavailable
from .registry import get_handler
from .task import Task

#: Tasks per enqueue call (each call is atomic), and entries per purge, drop or retry call: so
#: that no script call holds Redis for long (under a few ms each, measured with 300,000 tasks).
_BATCH = 500


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

    def enqueue(self, payload, **options):
        """Add one task; returns its id. See ``enqueue_many`` for the options."""
        return self.enqueue_many([payload], **options)[0]

    def enqueue_many(self, payloads, *, ids=None, **options):
        """Add tasks, atomically in steps of 5,000; returns their ids in order.

        Options: ``delay`` (seconds) or ``eta`` (a datetime) defers them; ``retries``,
        ``timeout`` (s) and ``backoff`` (s) override the handler's defaults; ``lock`` names a lock
        they take while running; ``unique=True`` derives a unique key from each payload (or pass
        the key as a string): while a task with that key is pending or running, enqueueing
        returns its id; ``callback`` (a URL) and ``meta`` (text) are kept with the task.
        ``ids`` gives the tasks' ids (made with ``new_task_id``) instead of fresh ones; an id
        already enqueued (even if its task has finished since, within ``ENQUEUE_DEDUP_FOR``) is
        then not enqueued again.

        Redis unreachable: retried for ``WORQR["ENQUEUE_RETRY_FOR"]`` seconds (2 by default),
        then ``RedisUnavailable`` is raised (the tasks of that call not acknowledged by Redis
        were not added). A retry after an unanswered call cannot add a task twice.
        """
        payloads = list(payloads)
        if ids is not None:
            ids = list(ids)
            if len(ids) != len(payloads) or any(keys.queue_from_task_id(i) != self.name for i in ids):
                raise InvalidTask(f"ids must be one task id of queue {self.name!r} per payload")
        batches = self._prepare(payloads, **options)
        if batches is None:  # a handler's lock function gave different locks: one call per lock
            ids = ids or [None] * len(payloads)
            return [self.enqueue_many([p], ids=None if i is None else [i], **options)[0] for p, i in zip(payloads, ids)]
        return self._enqueue(batches, ids).ids

    def _enqueue(self, batches, ids=None, *, retry_for=None, remember=None):
        """Run the checked enqueue; returns ``commands.Enqueued`` (ids, and Redis time). Given
        ``ids`` are remembered (see ``enqueue_many``) unless ``remember=False``; ``retry_for``
        overrides the setting."""
        when, opts, items = batches
        items = [((ids[i] if ids is not None else new_task_id(self.name)), *rest) for i, rest in enumerate(items)]
        names = ("retries", "timeout", "backoff", "lock", "callback", "meta")
        options = dict(zip(names, opts, strict=True))
        remember = ids is not None if remember is None else remember
        if not tracing.enabled(self.connection.config):
            return self._send(when, options, items, remember=remember, retry_for=retry_for)
        with tracing.enqueue_span(self.name, len(items)) as (span, trace):
            enqueued = self._send(when, options, items, trace, remember=remember, retry_for=retry_for)
            tracing.enqueued(span, enqueued.ids)
            return enqueued

    def _send(self, when, options, items, trace="", *, remember=False, retry_for=None):
        out, now, new = [], 0, False
        config = self.connection.config
        retry_for = config.enqueue_retry_for if retry_for is None else retry_for
        deadline = time.monotonic() + retry_for
        for start in range(0, len(items), _BATCH):
            batch = items[start : start + _BATCH]
            pause, attempt = 0.05, 0
            while True:
                # A retry remembers the ids: had the lost call been applied, this one adds nothing.
                keep = config.enqueue_dedup_for if remember or attempt else 0
                call = commands.enqueue(self.name, batch, when=when, trace=trace, remember=keep, **options)
                try:
                    reply = call.run(self.connection.enqueue_client)
                    break
                except NETWORK_ERRORS as exc:
                    if time.monotonic() + pause > deadline:
                        raise RedisUnavailable(
                            f"queue {self.name}: Redis unreachable, gave up after retrying for "
                            f"{retry_for:g} s (WORQR['ENQUEUE_RETRY_FOR']): {exc}; "
                            f"{len(items) - start} of {len(items)} tasks not added"
                        ) from exc
                    time.sleep(pause)
                    pause, attempt = min(pause * 2, 0.5), attempt + 1
            new = new or reply.is_new_queue
            out += reply.ids
            now = reply.now_ms
        if new:
            self.client.sadd(keys.KNOWN_QUEUES, self.name)
        return commands.Enqueued(new, now, out)

    def validate(self, payloads, **options):
        """Raise what ``enqueue_many`` would raise for these payloads and options; adds nothing."""
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
    ):
        """Check everything; returns (when, options, [(payload, unique key, kind)]), or None when
        a handler's lock function puts the payloads under different locks."""
        config = self.connection.config
        when = self._when(delay, eta)
        opts = self._options(retries, timeout, backoff, lock, callback, meta)
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
                raise PayloadTooLarge(
                    f"payload of {len(raw)} bytes is over the limit of "
                    f"{config.max_payload_bytes} bytes (WORQR['MAX_PAYLOAD_BYTES'])"
                )
            ukey = hashlib.sha1(raw).hexdigest() if unique is True else (unique or "")
            args.append((raw, ukey, kind))
        spec = get_handler(self.name)
        if lock is None and spec is not None and spec.lock is not None:
            if isinstance(spec.lock, str):
                opts[3] = keys.check_lock_key(spec.lock)
            elif payloads:
                locks = {keys.check_lock_key(self._lock_of(spec.lock, p)) for p in payloads}
                if len(locks) > 1:
                    return None
                opts[3] = locks.pop()
        return when, opts, args

    @staticmethod
    def _lock_of(lock_fn, payload):
        probe = Task(id="", queue="", payload=payload, state="pending")
        key = lock_fn(probe)
        if not isinstance(key, str):
            raise InvalidTask(f"the handler's lock function returned {key!r}, not a string")
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
        out = [""] * 6
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

    def delete(self, task_id):
        """Delete a task in any state but active."""
        code = commands.delete(self.name, [self._check_id(task_id)]).run(self.client)[0]
        commands.check(code, "delete", self.name, task_id)
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
        return total

    def drop(self):
        """Delete the queue: every task and key, counters included; running tasks are stopped."""
        while commands.drop(self.name, _BATCH).run(self.client):
            pass
        self.client.srem(keys.KNOWN_QUEUES, self.name)
