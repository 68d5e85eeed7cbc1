"""Enqueueing: the plain functions every producer calls (``Queue``, ``Batch``, the outbox, the
Tasks backend, schedules), with every option a keyword of its own.

- ``prepare`` checks payloads and task options before anything is written: a ``Prepared`` (when,
  the options as text in ``commands.TASK_OPTIONS``' order, and (payload bytes, unique key, kind)
  per payload), or None when the handler's lock or partition function puts the payloads under
  different keys (``enqueue_many`` then sends one group per key);
- ``enqueue_prepared`` sends a ``Prepared`` under given ids, in calls of ``BATCH`` tasks, each
  retried as every enqueue is (``sending``); ``enqueue_many`` does both, with ``after=`` parents
  linked first (``linking``); ``enqueue_plain`` is the common call (one text, no option);
- ``check_room`` checks ``MAX_QUEUES`` before a call that makes a queue.

Options that only the engine's own producers give: ``batch`` (the batch the tasks belong to),
``batch_callback`` (the batch they are a callback of), ``once`` (a key used once ever), ``links``
(traceparents the enqueue span links to), ``remember`` (whether the ids are remembered, so a
second push is a no-op), ``create`` (make the queue without checking ``MAX_QUEUES``: tasks
already accepted, the outbox's) and ``retry_for``. Telling the children of tasks cancelled at
once (``after=`` a parent that failed) is the caller's: ``workflows.tell_at_once``.
"""

import hashlib
import os
from datetime import UTC, datetime
from functools import partial
from typing import NamedTuple

from . import commands, controls, crypto, keys, linking, text, tracing
from .errors import InvalidTask, PayloadTooLarge, TooManyQueues
from .numbers import MAX_RETRIES, MAX_SECONDS, is_finite, shown
from .registry import get_handler
from .sending import Sending
from .task import Task

#: Tasks per enqueue call (each call is atomic): so that no script call holds Redis for long
#: (under a few ms each, measured with 300,000 tasks).
BATCH = 500
#: The longest ``meta``, in characters: kept with its task, and read with it wherever it is shown.
META_MAX = 65536
#: Where the lock key and the partition key stand in a prepared option list.
_LOCK, _PARTITION = commands.TASK_OPTIONS.index("lock"), commands.TASK_OPTIONS.index("partition")


def new_task_id(queue):
    return f"{queue}-{os.urandom(8).hex()}"


class Prepared(NamedTuple):
    """Checked payloads and options (``prepare``): ``when`` ('' now, '+<ms>' a delay, '@<ms>' a due
    time), ``options`` (text, '' when not given, in ``commands.TASK_OPTIONS``' order; tags a
    list) and ``items``: (payload bytes, unique key or '', 'b' if bytes else '') per payload."""

    when: str
    options: list
    items: list


# -- checking ------------------------------------------------------------------------------


def _number(name, value, *, minimum=0.0, strict=False, integer=False, maximum=MAX_SECONDS):
    """``value`` if it is a number (an integer if ``integer``) from ``minimum`` (excluded if
    ``strict``) to ``maximum`` (seconds, unless ``integer``), else InvalidTask naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "an integer" if integer else "a number"
        raise InvalidTask(f"{name} must be {kind}, not {shown(value)}")
    if integer and not isinstance(value, int):
        raise InvalidTask(f"{name} must be an integer, not {shown(value)}")
    if not is_finite(value) or value < minimum or (strict and value == minimum):
        raise InvalidTask(f"{name} must be {'>' if strict else '>='} {minimum:g}, not {shown(value)}")
    if value > maximum:
        unit = "" if integer else " seconds (100 years)"
        raise InvalidTask(f"{name} must be at most {maximum:,}{unit}, not {shown(value)}")
    return value


def _too_large(raw, config):
    raise PayloadTooLarge(
        f"payload of {len(raw)} bytes is over the limit of "
        f"{config.max_payload_bytes} bytes (WORQR['MAX_PAYLOAD_BYTES'])"
    )


def when_of(delay, eta):
    """``delay`` (seconds) or ``eta`` (a datetime; naive is UTC) as ``Prepared.when``."""
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


def task_options(retries, timeout, backoff, lock, callback, meta):
    """The task options but tags, as text ('' when not given), in ``commands.TASK_OPTIONS``'s order."""
    out = [""] * (len(commands.TASK_OPTIONS) - 1)
    if retries is not None:
        out[0] = str(_number("retries", retries, integer=True, maximum=MAX_RETRIES))
    if timeout is not None:
        out[1] = repr(float(_number("timeout", timeout, strict=True)))
    if backoff is not None:
        out[2] = repr(float(_number("backoff", backoff)))
    if lock is not None:
        out[3] = text.checked("lock", keys.check_lock_key(lock))
    if callback is not None:
        if not isinstance(callback, str) or not callback or len(callback) > 2048:
            raise InvalidTask("callback must be a URL of at most 2048 characters")
        out[4] = text.checked("callback", callback)
    if meta is not None:
        if not isinstance(meta, str) or len(meta) > META_MAX:
            raise InvalidTask(f"meta must be a string of at most {META_MAX:,} characters")
        out[5] = text.checked("meta", meta)
    return out


def lock_of(lock_fn, payload, queue=""):
    """The lock key the handler's function gives a task of ``payload``: InvalidTask naming the
    queue if it raises or gives anything but a lock key (``keys.check_lock_key``)."""
    probe = Task(id="", queue=queue, payload=payload, state="pending")
    try:
        key = lock_fn(probe)
    except Exception as exc:
        raise InvalidTask(f"queue {queue!r}: the handler's lock function raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(key, str) or not key or len(key) > keys.LOCK_KEY_MAX:
        raise InvalidTask(
            f"queue {queue!r}: the handler's lock function returned {key!r}, "
            f"not a string of 1 to {keys.LOCK_KEY_MAX} characters"
        )
    return text.checked(f"queue {queue!r}: the lock key its handler's function gave", key)


def partition_of(queue, partition_fn, payload):
    """The partition key the handler's function gives a task of ``payload``: InvalidTask
    naming the queue if it raises or gives anything but a string of 1 to 200 characters."""
    probe = Task(id="", queue=queue, payload=payload, state="pending")
    try:
        key = partition_fn(probe)
    except Exception as exc:
        raise InvalidTask(
            f"queue {queue!r}: the handler's partition function raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(key, str) or not key or len(key) > keys.LOCK_KEY_MAX:
        raise InvalidTask(
            f"queue {queue!r}: the handler's partition function returned {key!r}, "
            f"not a string of 1 to {keys.LOCK_KEY_MAX} characters"
        )
    return text.checked(f"queue {queue!r}: the partition key its handler's function gave", key)


def prepare(
    config,
    queue,
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
    """Check everything (``config``: the connection's ``Config``); returns a ``Prepared``, or
    None when a handler's lock or partition function puts the payloads under different keys."""
    when = when_of(delay, eta)
    opts = task_options(retries, timeout, backoff, lock, callback, meta)
    opts.append([text.checked("tags", t) for t in keys.check_tags(tags)] if tags is not None else [])
    if unique is not True and unique is not False and not isinstance(unique, str):
        raise InvalidTask(f"unique must be True, False or a key string, not {unique!r}")
    if isinstance(unique, str):
        text.checked("unique", keys.check_lock_key(unique))
    args = []
    for payload in payloads:
        if isinstance(payload, str):
            raw, kind = text.payload(payload), ""
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
    spec = get_handler(queue)
    if lock is None and spec is not None and spec.lock is not None:
        if isinstance(spec.lock, str):
            opts[_LOCK] = keys.check_lock_key(spec.lock)
        elif payloads:
            locks = {lock_of(spec.lock, p, queue) for p in payloads}
            if len(locks) > 1:
                return None
            opts[_LOCK] = locks.pop()
    if spec is not None and spec.limits.partition is not None and payloads:
        parts = {partition_of(queue, spec.limits.partition, p) for p in payloads}
        if len(parts) > 1:
            return None
        opts[_PARTITION] = parts.pop()
    return Prepared(when, opts, args)


def controls_of(config, queue, count, options):
    """The task controls' script arguments (``controls.check``), popped from ``options``: the
    handler's ``expires`` by default; no debounce on an encrypted queue (a payload is sealed for
    its own task, and a debounce replaces another task's)."""
    given = {k: options.pop(k) for k in ("expires", "throttle", "debounce") if k in options}
    spec = get_handler(queue)
    if given.get("debounce") is not None and crypto.encrypts(config, queue):
        raise InvalidTask(f"queue {queue!r} is encrypted: debounce is not available on it")
    if "expires" not in given and spec is not None and spec.expires:
        given["expires"] = spec.expires
    return controls.check(count, **given, delay=options.get("delay"), eta=options.get("eta"))


def validate(connection, queue, payloads, options, *, after=None, on_parent_failure="cancel"):
    """Raise what ``enqueue_many`` would raise for these payloads and options; adds nothing."""
    payloads, options = list(payloads), dict(options)
    controls_of(connection.config, queue, len(payloads), options)
    parents = linking.check_after(after, on_parent_failure, None)
    if parents:
        linking.check_parents_exist(connection.client, parents)
    prepare(connection.config, queue, list(payloads), **options)


def check_room(client, queue, limit):
    """Before a call that makes ``queue``: raise TooManyQueues if ``limit`` (MAX_QUEUES) queues
    exist and this is not one of them (one round trip). Queues made at the same moment by other
    producers may each pass: the limit can be passed by as many as are made at once."""
    p = client.pipeline(transaction=False)
    p.sismember(keys.KNOWN_QUEUES, queue)
    p.scard(keys.KNOWN_QUEUES)
    known, count = p.execute()
    if not known and count >= limit:
        raise TooManyQueues(queue, limit)


# -- sending -------------------------------------------------------------------------------


def enqueue_plain(connection, queue, payload):
    """The common call, ``Queue.enqueue(text)`` with no option: the same checks and the same
    script call as ``enqueue_many``'s, without its batching and option handling. Returns the id."""
    config = connection.config
    raw = text.payload(payload)
    if len(raw) > config.max_payload_bytes:
        _too_large(raw, config)
    spec = get_handler(queue)
    if spec is not None and (spec.lock is not None or spec.limits.partition is not None or spec.expires):
        return enqueue_many(connection, queue, [payload])[0]  # a lock, partition or expiry from the handler
    if queue in config.encrypted_queues:  # sealed for its task: the full path
        return enqueue_many(connection, queue, [payload])[0]
    task_id = new_task_id(queue)
    if not tracing.enabled(config):
        return _enqueue_one(connection, queue, task_id, raw, "")
    with tracing.enqueue_span(queue, 1) as (span, trace):
        task_id = _enqueue_one(connection, queue, task_id, raw, trace)
        tracing.enqueued(span, [task_id])
        return task_id


def _enqueue_one(connection, queue, task_id, raw, trace):
    """Send the common call (retried as every enqueue is: ``sending``; a retry after a lost
    reply adds nothing, the task be pending or ended). A queue that does not exist yet takes
    the long way, which checks MAX_QUEUES first."""
    sending = Sending(connection, queue, [task_id])
    attempt = partial(
        commands.enqueue_one,
        connection.enqueue_client,
        queue,
        task_id,
        raw,
        trace,
        create=False,
        window=sending.window,
    )
    is_new, given = sending.send(attempt, 1)
    if given is None:  # no such queue (nothing written)
        options = dict.fromkeys(commands.TASK_OPTIONS, "")
        return _send(connection, queue, sending, "", options, [(task_id, raw, "", "")], trace).ids[0]
    sending.done([given])
    if is_new:
        sending.known()
    return given


def enqueue_many(
    connection,
    queue,
    payloads,
    options=None,
    *,
    ids=None,
    after=None,
    on_parent_failure="cancel",
    batch="",
    batch_callback="",
    once="",
    links=None,
    remember=None,
):
    """Add tasks to ``queue``, atomically in steps of ``BATCH``; returns their ids in order
    (``Queue.enqueue_many`` describes ``options``, ``ids``, ``after`` and ``on_parent_failure``;
    the module doc the others). ``remember`` None: the ids are remembered if the caller gave
    them. With ``after=``, the parents are linked first (in their queues, under the same retries
    and deadline); the caller then tells the children of tasks cancelled at once
    (``workflows.tell_at_once``)."""
    payloads, options = list(payloads), dict(options or {})
    if ids is not None:
        ids = list(ids)
        if len(ids) != len(payloads) or any(keys.queue_from_task_id(i) != queue for i in ids):
            raise InvalidTask(f"ids must be one task id of queue {queue!r} per payload")
    # ids the caller gave are remembered (a second push is a no-op); ids made here are new
    remember = ids is not None if remember is None else remember
    parents = linking.check_after(after, on_parent_failure, ids)
    given = dict(options)
    workflow = dict(batch=batch, batch_callback=batch_callback, once=once, links=links, remember=remember)
    workflow["controls"] = controls_of(connection.config, queue, len(payloads), options)
    prepared = prepare(connection.config, queue, payloads, **options)
    if prepared is None:  # the handler's lock or partition function gave different keys
        del workflow["controls"]
        return _enqueue_grouped(connection, queue, payloads, ids, given, after, on_parent_failure, workflow)
    ids = ids if ids is not None else [new_task_id(queue) for _ in payloads]
    if not parents:
        return enqueue_prepared(connection, queue, prepared, ids, **workflow).ids
    sending = Sending(connection, queue, ids)
    client = connection.enqueue_client
    deps = sending.send(partial(linking.link, client, parents, ids, on_parent_failure), 0)
    return enqueue_prepared(connection, queue, prepared, ids, parents=deps, sending=sending, **workflow).ids


def _enqueue_grouped(connection, queue, payloads, ids, options, after, on_parent_failure, workflow):
    """Enqueue payloads whose lock or partition keys differ: one call per key, ids in order."""
    spec = get_handler(queue)
    ids = ids or [new_task_id(queue) for _ in payloads]
    groups = {}
    for i, payload in enumerate(payloads):
        lock = options.get("lock")
        if lock is None and callable(spec.lock):
            lock = lock_of(spec.lock, payload, queue)
        part = partition_of(queue, spec.limits.partition, payload) if spec.limits.partition else None
        groups.setdefault((lock, part), []).append(i)
    out = [None] * len(payloads)
    for indexes in groups.values():
        got = enqueue_many(
            connection,
            queue,
            [payloads[i] for i in indexes],
            options,
            ids=[ids[i] for i in indexes],
            after=after,
            on_parent_failure=on_parent_failure,
            **workflow,
        )
        for i, task_id in zip(indexes, got):
            out[i] = task_id
    return out


def enqueue_prepared(
    connection,
    queue,
    prepared,
    ids=None,
    *,
    parents="",
    batch="",
    batch_callback="",
    once="",
    links=None,
    retry_for=None,
    remember=None,
    sending=None,
    create=False,
    controls=controls.NONE,
):
    """Send a ``Prepared`` under ``ids`` (fresh ones if None); returns ``commands.Enqueued`` (ids,
    and Redis time); ``controls``: the script's arguments ``controls_of`` made. An encrypted
    queue's payloads are sealed here, each for its task (``crypto``). Given ``ids`` are remembered unless ``remember=False``; ``parents``: what
    ``linking.link`` answered; ``retry_for`` overrides the setting; ``sending``: the ``Sending``
    of the enqueue these calls belong to (a new one if None); ``create``: the queue is made if
    need be without checking MAX_QUEUES (tasks already accepted: the outbox's)."""
    when, opts, items = prepared
    items = [((ids[i] if ids is not None else new_task_id(queue)), *rest) for i, rest in enumerate(items)]
    if crypto.encrypts(connection.config, queue):
        ring = crypto.keyring(connection.config)
        items = [(i, ring.seal(queue, i, raw, kind), uk, "e") for i, raw, uk, kind in items]
    extra = dict(parents=parents, batch=batch, batch_callback=batch_callback, once=once, controls=controls)
    options = dict(zip(commands.TASK_OPTIONS, opts, strict=True))
    remember = ids is not None if remember is None else remember
    if sending is None:
        sending = Sending(connection, queue, [item[0] for item in items], retry_for)
    if not tracing.enabled(connection.config):
        return _send(connection, queue, sending, when, options, items, remember=remember, extra=extra, create=create)
    with tracing.enqueue_span(queue, len(items), links=links) as (span, trace):
        enqueued = _send(
            connection, queue, sending, when, options, items, trace, remember=remember, extra=extra, create=create
        )
        tracing.enqueued(span, enqueued.ids)
        return enqueued


def _send(connection, queue, sending, when, options, items, trace="", *, remember=False, extra=None, create=False):
    """Send ``items`` in calls of ``BATCH`` (``sending``): ``commands.Enqueued`` of them all.
    A call that finds the queue does not exist is made again once MAX_QUEUES was checked
    (``check_room``; ``create``: without the check)."""
    config = connection.config
    keep = config.enqueue_dedup_for if remember else 0
    client, now, new = connection.enqueue_client, 0, False
    for start in range(0, len(items), BATCH):
        batch = items[start : start + BATCH]
        while True:
            call = commands.enqueue(
                queue,
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
            sending.send(partial(check_room, client, queue, config.max_queues), len(batch))
            create = True
        sending.done(reply.ids)
        new, now = new or reply.is_new_queue, reply.now_ms
    if new:
        sending.known()
    return commands.Enqueued(new, now, sending.added)
