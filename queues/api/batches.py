"""The batches' endpoints: open a batch, add tasks, close it, read it, cancel it (``Batch``).

A batch id is ``b-<16 hex digits>`` (400 otherwise); an unknown one is 404; adding to a closed
batch is 409. Changes need ``enqueue_task`` (cancelling: ``cancel_task``) and write an audit
row in the same transaction.
"""

import json

from django.urls import reverse

from ..conf import get_connection
from ..engine import Batch, keys
from ..quoting import shown
from .auth import can_view, require
from .bodies import BATCH_TASKS, CREATE_BATCH
from .errors import BadRequest, NotFound
from .http import endpoint, json_body, respond
from .views import audited


def batch_json(info):
    out = dict(info)
    for name in ("created_at", "finished_at"):
        out[name] = out[name].isoformat() if out[name] else None
    return out


def known_batch(batch_id):
    """(Batch handle, its info): 400 for a malformed id, 404 for an unknown one."""
    if not keys.is_batch_id(batch_id):
        raise BadRequest(f"id: {shown(batch_id)} is not a batch id (b- and 16 hex digits)", "id")
    info = Batch.get(batch_id, get_connection())
    if info is None:
        raise NotFound(f"no batch {batch_id}")
    return Batch.open(batch_id, get_connection()), info


@endpoint(POST="enqueue_task")
def batch_list(request, token):
    options = CREATE_BATCH.parse(json_body(request))
    with audited(token, "open_batch", "", detail=json.dumps(options, sort_keys=True)):
        batch = Batch(connection=get_connection(), **options)
    response = respond({"id": batch.id}, status=201)
    response["Location"] = reverse("queues-api:batch", args=[batch.id])
    return response


@endpoint(GET="view_dashboard", DELETE="cancel_task")
def batch(request, token, batch_id):
    if request.method == "DELETE":
        require(token, "purge_queue")  # every task of the batch at once: what purging a queue needs too
    handle, info = known_batch(batch_id)
    if request.method == "GET":
        return respond(batch_json(info))
    with audited(token, "cancel_batch", "", detail=batch_id):
        asked = handle.cancel()
    return respond({"id": batch_id, "cancelled": asked})


@endpoint(POST="enqueue_task")
def batch_tasks(request, token, batch_id):
    handle, _ = known_batch(batch_id)
    options = BATCH_TASKS.parse(json_body(request))
    queue, payloads = options.pop("queue"), options.pop("payloads")
    with audited(token, "enqueue", queue, detail=f"{len(payloads)} task(s) into batch {batch_id}"):
        ids = handle.enqueue_many(queue, payloads, **options)
    return respond({"ids": ids}, status=201)


@endpoint(POST="enqueue_task")
def batch_close(request, token, batch_id):
    handle, _ = known_batch(batch_id)
    with audited(token, "close_batch", "", detail=batch_id):
        handle.close()
    if not can_view(token):  # what GET answers needs view_dashboard
        return respond({"id": batch_id, "closed": True})
    return respond(batch_json(Batch.get(batch_id, get_connection())))
