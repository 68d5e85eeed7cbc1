"""Queue: enqueue tasks and manage them (cancel, retry, delete, pause, drop, purge, read)."""

import hashlib
import math
import os
import random
from datetime import UTC, datetime

from . import keys, scripts
from .connection import get_default
from .errors import InvalidInput, InvalidState, InvalidTask, PayloadTooLarge, TaskNotFound
from .registry import get_handler
from .task import Task

_BATCH = 5000


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

    def _run(self, script, *args):
        return scripts.run(self.client, script, self.name, *args)

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
        ``ids`` gives the tasks' ids (made with ``new_task_id``) instead of fresh ones.
        """
        payloads = list(payloads)
        if ids is not None:
            ids = list(ids)
            if len(ids) != len(payloads) or any(keys.queue_from_task_id(i) != self.name for i in ids):
                raise InvalidTask(f"ids must be one task id of queue {self.name!r} per payload")
        batches = self._prepare(payloads, **options)
        if batches is None:  # a handler's lock function gave different locks: one call per lock
            ids = ids or [None] * len(payloads)
            return [self.enqueue_many([p], ids=None if i is None else [i], **options)[0]
                    for p, i in zip(payloads, ids)]
        when, opts, args = batches
        for i in range(0, len(args), 4):
            args[i] = ids[i // 4] if ids is not None else new_task_id(self.name)
        out = []
        for start in range(0, len(args), 4 * _BATCH):
            chunk = args[start:start + 4 * _BATCH]
            reply = self._run("enqueue", len(chunk) // 4, when, *opts, *chunk)
            if reply[0] == 1:
                self.client.sadd(keys.KNOWN_QUEUES, self.name)
            out += [i.decode() for i in reply[1:]]
        return out

    def validate(self, payloads, **options):
        """Raise what ``enqueue_many`` would raise for these payloads and options; adds nothing."""
        self._prepare(list(payloads), **options)

    def _prepare(self, payloads, *, delay=None, eta=None, retries=None, timeout=None, backoff=None,
                 lock=None, unique=False, callback=None, meta=None):
        """Check everything; returns (when, options, per-task arguments without ids), or None
        when a handler's lock function puts the payloads under different locks."""
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
            args += [None, raw, ukey, kind]
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
        h = self.client.hgetall(keys.task_key(self.name, self._check_id(task_id)))
        return Task.from_hash(task_id, self.name, h)

    def counts(self):
        """Tasks per state and the queue's counters."""
        from .readmodel import queue_counts

        return queue_counts(self.client, self.name)

    def failures(self, limit=100):
        """The newest failures first: id, payload, error, traceback, attempts, worker, failed_at."""
        from .readmodel import failures

        return failures(self.client, self.name, limit=limit)

    def is_paused(self):
        return bool(self.client.hexists(keys.queue_key(self.name, "meta"), "paused"))

    # -- managing --------------------------------------------------------------------------

    def cancel(self, task_id):
        """Cancel a task: True if it was pending, delayed, waiting or active."""
        code = self._run("cancel", self._check_id(task_id))
        if code == -1:
            raise InvalidState(f"task {task_id} of queue {self.name} has failed: delete it instead")
        return code > 0

    def retry(self, task_id):
        """Put a failed task back at the tail of the queue with its attempts reset."""
        code = self._run("retry", 1, self._check_id(task_id))[0]
        if code == 0:
            raise TaskNotFound(f"no task {task_id} in queue {self.name}")
        if code == -1:
            raise InvalidState(f"task {task_id} of queue {self.name} is not failed")
        return True

    def retry_all(self):
        """Retry every failed task; returns how many."""
        total = 0
        while True:
            ids = self.client.zrange(keys.queue_key(self.name, "failed"), 0, 999)
            if not ids:
                return total
            total += sum(1 for c in self._run("retry", len(ids), *ids) if c == 1)

    def delete(self, task_id):
        """Delete a task in any state but active."""
        code = self._run("delete", 1, self._check_id(task_id))[0]
        if code == 0:
            raise TaskNotFound(f"no task {task_id} in queue {self.name}")
        if code == -1:
            raise InvalidState(f"task {task_id} of queue {self.name} is running: cancel it instead")
        return True

    def pause(self):
        """Stop starting tasks (enqueues are still accepted); durable, seen by every worker at once."""
        changed = bool(self._run("pause", "1"))
        self.client.sadd(keys.KNOWN_QUEUES, self.name)
        return changed

    def resume(self):
        return bool(self._run("pause", "0"))

    def purge(self):
        """Delete every pending task; returns how many."""
        total = 0
        while n := self._run("purge", _BATCH):
            total += n
        return total

    def drop(self):
        """Delete the queue: every task and key, counters included."""
        while self._run("drop", _BATCH):
            pass
        self.client.srem(keys.KNOWN_QUEUES, self.name)


def jitter(config):
    return random.random() * config.backoff_jitter
