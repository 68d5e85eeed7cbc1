"""One batch's state, as ``Batch.get``, ``task.batch`` and ``readmodel.batch`` give it: a read of
the batch's hash and of its queues' counters of running tasks. Here, below ``task`` (whose
``Task.batch`` reads it) and the read model (which builds tasks), so that neither needs the
other; the read model gives it as ``readmodel.batch``."""

import json

from . import keys
from .connection import get_default
from .errors import InvalidInput
from .replies import decode, ms_to_datetime


def get(batch_id, connection=None):
    """The batch of id ``batch_id`` read with ``connection`` (the default one if None), or None if
    unknown; InvalidInput if ``batch_id`` is not a batch id."""
    if not keys.is_batch_id(batch_id):
        raise InvalidInput(f"{batch_id!r} is not a batch id")
    return read((connection or get_default()).client, batch_id)


def read(client, batch_id):
    """One batch as a dict (None if unknown): id, description, state, total, pending, active,
    completed, failed, cancelled, created_at, finished_at, closed, cancel_requested, callbacks
    ({on_success, on_complete}: [queue, payload] or None; the payload of an encrypted queue's
    callback reads "encrypted") and its queues. ``active`` sums the
    per-queue counters of its running tasks; ``pending`` is the rest of the unfinished ones."""
    p = client.pipeline(transaction=False)
    p.hgetall(keys.batch_key(batch_id, "batch"))
    p.smembers(keys.batch_key(batch_id, "queues"))
    raw, queues = p.execute()
    if not raw:
        return None
    h = {decode(k): decode(v) for k, v in raw.items()}
    queues = sorted(decode(q) for q in queues)
    p = client.pipeline(transaction=False)
    for q in queues:
        p.hget(keys.queue_key(q, "batchruns"), batch_id)
    active = sum(int(n or 0) for n in p.execute()) if queues else 0
    n = {k: int(h.get(k) or 0) for k in ("total", "completed", "failed", "cancelled")}
    unfinished = max(0, n["total"] - n["completed"] - n["failed"] - n["cancelled"])
    active = max(0, min(active, unfinished))

    def callback(field):
        if not h.get(field):
            return None
        queue, payload, kind = json.loads(h[field])
        return [queue, "encrypted" if kind == "e" else payload]  # (as a task's sealed payload reads)

    return dict(
        id=batch_id,
        description=h.get("d", ""),
        state=h.get("st", "open"),
        **n,
        pending=unfinished - active,
        active=active,
        created_at=ms_to_datetime(h.get("c")),
        finished_at=ms_to_datetime(h.get("fin")),
        closed=bool(h.get("closed")),
        cancel_requested=bool(h.get("x")),
        callbacks_enqueued=h.get("cb") == "done",
        on_success=callback("os"),
        on_complete=callback("oc"),
        queues=queues,
    )
