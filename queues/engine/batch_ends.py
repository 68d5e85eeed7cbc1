"""The end of a batch's tasks and of the batch: counting ended tasks (``tell``, which
``workflows.drain`` calls), enqueueing the finished batch's callbacks exactly once
(``fire_callbacks``), and the workers' sweep of batches whose callbacks a dead process left
undone (``sweep``). ``batches`` has the ``Batch`` class and how it stays exact."""

import hashlib
import json
import logging

from . import commands, crypto, enqueueing, keys, readmodel
from .connection import Connection, get_default
from .errors import InvalidInput

log = logging.getLogger("worqr")

#: How long a finished batch's callback that can't be enqueued (no key opens it, or its queue's
#: handler refuses it) is tried again by the sweep before it is given up, logged: within the 7
#: days its callbacks' once keys last, so that the other callback, enqueued already, is never
#: enqueued a second time.
GIVE_UP_MS = 6 * 86400 * 1000


def callback_task_id(queue, batch_id, kind):
    """The callback's task id, the same on every attempt: ``<queue>-<16 hex>``."""
    return f"{queue}-{hashlib.sha1(f'{batch_id}:{kind}'.encode()).hexdigest()[:16]}"


def tell(client, batch_id, ended):
    """Tasks of a batch ended ((id, outcome[, the run's traceparent]) each): count them; fire the
    callbacks if that finished it."""
    if commands.batch_tell(batch_id, ended).run(client):
        fire_callbacks(client, batch_id)


def fire_callbacks(client, batch_id, now_ms=None):
    """Enqueue the finished batch's callbacks, each exactly once, then mark them done. Safe to
    repeat (a sweep after a crash): each enqueue has a once key. One that can't be enqueued keeps
    the batch due, until GIVE_UP_MS after the batch finished (``now_ms``: the sweep's time)."""
    info = readmodel.batch(client, batch_id)
    if info is None or info["finished_at"] is None:
        return False
    raw = client.hmget(keys.batch_key(batch_id, "batch"), "os", "oc", "cb", "rt")
    links = [raw[3].decode()] if raw[3] else None  # the run that ended its last task (tracing on)
    if raw[2] == b"due":
        wanted = [("complete", raw[1])]
        if info["state"] == "succeeded":
            wanted.insert(0, ("success", raw[0]))
        unreadable = False
        for kind, doc in wanted:
            if not doc:
                continue
            queue, payload, flag = json.loads(doc)
            task_id = callback_task_id(queue, batch_id, kind)
            if flag == "b":
                payload = payload.encode("latin-1")
            elif flag == "e":  # sealed for that task: opened here, sealed again by its enqueue
                try:
                    opened, opened_kind = crypto.keyring(_config_of(client)).open(
                        queue, task_id, payload.encode("latin-1")
                    )
                except crypto.PayloadUnreadable as exc:  # a key dropped too early: kept due, tried again
                    log.error("worqr: batch %s: its %s callback is not enqueued: %s", batch_id, kind, exc)
                    unreadable = True
                    continue
                payload = opened if opened_kind == "b" else opened.decode("utf-8", "surrogateescape")
            try:
                _enqueue_callback(client, queue, payload, task_id, batch_id, kind, links)
            except InvalidInput as exc:  # its queue's handler refuses it (a lock function that raises)
                log.error("worqr: batch %s: its %s callback is not enqueued: %s", batch_id, kind, exc)
                unreadable = True
        if unreadable:  # the sweep tries again (the callbacks enqueued meanwhile add nothing: once keys)
            if now_ms is None or now_ms - info["finished_at"].timestamp() * 1000 < GIVE_UP_MS:
                return False
            log.error(
                "worqr: batch %s: giving its callbacks up, %d days after it finished", batch_id, GIVE_UP_MS // 86400000
            )
        commands.batch_callbacks_done(batch_id).run(client)
    client.zrem(keys.BATCHES_DUE, batch_id)
    return True


def _enqueue_callback(client, queue, payload, task_id, batch_id, kind, links=None):
    """Enqueue one callback, under its once key; ``links``: its enqueue span links to the run
    that finished the batch."""
    keys.check_queue_name(queue)
    connection = client if isinstance(client, Connection) else _ClientConnection(client)
    enqueueing.enqueue_many(
        connection,
        queue,
        [payload],
        ids=[task_id],
        batch_callback=batch_id,
        once=f"batch:{batch_id}:{kind}",
        links=links or None,
    )


def _config_of(client):
    return client.config if isinstance(client, Connection) else get_default().config


class _ClientConnection:
    """A connection-like wrapper around a bare client (the drain runs with one)."""

    def __init__(self, client):
        self.client = client
        self.enqueue_client = client
        self.config = _config_of(client)


def sweep(client, now_ms, limit=20):
    """A worker's sweep: fire the callbacks of closed batches that finished but whose callbacks a
    dead process left undone; batches still running are looked at again later."""
    for batch_id in readmodel.batches_due(client, limit, before_ms=now_ms - 2000):
        if not fire_callbacks(client, batch_id, now_ms):
            client.zadd(keys.BATCHES_DUE, {batch_id: now_ms}, xx=True)
