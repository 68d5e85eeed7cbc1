"""What an expired task tells (``expires=``): its callback URL gets an "expired" notice, its
trace gets a span with the outcome ``expired``.

A task whose time to start passed ends in ``take.lua`` (``includes/expiry.lua``), never run. If
it has a callback URL or a trace context, that script keeps them in ``links:<id>`` and puts the
id in the queue's outbox, in the same call; ``workflows.drain`` (the worker told at once, or any
worker's outbox sweep) then calls ``tell`` before taking it off the outbox. So a crash between
the two repeats ``tell``, never skips it:

- the notice is a callback task of the same queue, enqueued under a once key and an id made
  from the expired task's (``notice_id``), so a repeated ``tell`` adds nothing: it is delivered
  at least once, with the retries, backoff and failed set of every callback task. Its payload is
  the body the receiver gets (``notice_body``), its retries and backoff the expired task's; ``webhooks.deliver`` knows it by its meta and id;
- the span (``tracing.expired_span``) is a child of the task's enqueue span; a repeated ``tell``
  may record it twice.
"""

import hashlib
import json

from . import enqueueing, tracing
from .connection import Connection
from .replies import ms_to_datetime

#: The meta of a notice task: this, then the expired task's id.
NOTICE_META = "worqr:expired "


def notice_id(queue, task_id):
    """The notice task's id for expired task ``task_id``: ``<queue>-<16 hex>``, the same every time."""
    return f"{queue}-{hashlib.sha1(f'expired:{task_id}'.encode()).hexdigest()[:16]}"


def notice_body(queue, task_id, expires_ms):
    """The JSON body POSTed to the callback URL of an expired task (no payload: it never ran)."""
    return json.dumps(
        {
            "id": task_id,
            "queue": queue,
            "outcome": "expired",
            "expires_at": ms_to_datetime(expires_ms).isoformat(),
        }
    )


def expired_of(task):
    """The id of the expired task a notice task tells of, or None if ``task`` is no notice."""
    meta = task.meta or ""
    if not meta.startswith(NOTICE_META):
        return None
    original = meta[len(NOTICE_META) :]
    return original if task.id == notice_id(task.queue, original) else None


def tell(client, config, queue, task_id, info):
    """Task ``task_id`` of ``queue`` expired; ``info``: its callback URL, trace context and
    expiry time (ms), as ``readmodel.links_many`` gives them. Record its span, enqueue its notice."""
    trace = info["trace"]
    if trace and tracing.enabled(config):
        tracing.expired_span(queue, task_id, trace)
    if not info["callback"]:
        return
    connection = client if isinstance(client, Connection) else _Bare(client, config)
    options = {"callback": info["callback"], "meta": NOTICE_META + task_id, "expires": None}
    for name in ("retries", "backoff"):  # the expired task's own, else the defaults
        if info.get(name) is not None:
            options[name] = info[name]
    with tracing.attached_carried(trace if tracing.enabled(config) else ""):
        enqueueing.enqueue_many(
            connection,
            queue,
            [notice_body(queue, task_id, info["expires"])],
            options,
            ids=[notice_id(queue, task_id)],
            once=f"expired:{task_id}",
        )


class _Bare:
    """A connection-like wrapper around a bare client (the drain runs with one)."""

    def __init__(self, client, config):
        self.client = client
        self.enqueue_client = client
        self.config = config
