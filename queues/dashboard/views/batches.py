"""The Batches page (every batch with a live progress bar) and a batch's page (its progress,
callbacks and one page of its tasks with their states, or of those in one state: ``?state=failed``),
with its actions: cancel its unfinished tasks (``cancel_task``), retry its failed ones
(``retry_task``), each a bounded step (pressed again, it goes on) and audited."""

from urllib.parse import urlencode

from django.http import JsonResponse
from django.urls import reverse

from ...engine import batch_actions, keys
from .. import graphs, queries
from ..access import action_required, post_only, staff_required, wants_json
from ..feeds import parse_page
from .actions import _audit, _done, _refused
from .common import BadInput, client, handles_bad_input, live_path, render_page


def _page(request):
    try:
        return parse_page(request.GET.get("page"))
    except ValueError as exc:
        raise BadInput(str(exc)) from None


@staff_required
@handles_bad_input
def batch_list(request):
    page = _page(request)
    return render_page(
        request,
        "queues/batches.html",
        {"title": "Batches", "snap": queries.batches(client(), page), "live": live_path("batches", page=page)},
    )


def _check_batch(batch_id):
    if not keys.is_batch_id(batch_id):
        raise BadInput(f"{batch_id[:40]!r} is not a batch id (b- and 16 hex digits).")


def _start(raw):
    """Where a filtered page or a retry step starts in the batch's tasks: a whole number."""
    raw = raw or "0"
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 12):
        raise BadInput("from must be a whole number.")
    return int(raw)


@staff_required
@handles_bad_input
def batch(request, batch_id):
    _check_batch(batch_id)
    page = _page(request)
    state = request.GET.get("state") or ""
    if state and state not in queries.BATCH_STATES:
        raise BadInput(f"state must be one of {', '.join(queries.BATCH_STATES)}.")
    snapshot = queries.batch(client(), batch_id, page)
    if snapshot["batch"] is None:  # as its live feed is closed with 4404 (queries.batch_exists)
        raise BadInput(f"There is no batch {batch_id}.", status=404)
    filtered = queries.batch_filtered(client(), batch_id, state, _start(request.GET.get("from"))) if state else None
    return render_page(
        request,
        "queues/batch.html",
        {
            "title": f"Batch {batch_id}",
            "batch_id": batch_id,
            "snap": snapshot,
            "state": state,
            "states": queries.BATCH_STATES,
            "filtered": filtered,
            "retry_from": _start(request.GET.get("retry_from")),
            "live": live_path("batch", batch_id, page=page),
            # The graph draws the whole batch: on its unfiltered page only.
            "graph": None
            if state
            else graphs.of_reading(queries.batch_graph(client(), batch_id), f"Tasks of batch {batch_id}"),
        },
    )


@post_only
@action_required("cancel_task", "purge_queue")
def batch_cancel(request, batch_id):
    """Cancel the batch's unfinished tasks, up to 2,000 a press. Every task of a batch at once is
    what a queue-wide action does, so it needs what purging a queue needs too (as a bulk cancel of
    "all matching" a search does)."""
    try:
        _check_batch(batch_id)
        if request.POST.get("confirm") != "yes":
            raise BadInput("Tick the confirmation box to cancel the batch.")
    except BadInput as exc:
        return _refused(request, exc)
    cancelled, more = batch_actions.cancel_unfinished(client(), batch_id)
    _audit(request, "batch_cancel", detail=f"batch {batch_id}: {cancelled} tasks" + (", more left" if more else ""))
    message = f"Batch {batch_id}: {cancelled} unfinished tasks cancelled" + (
        "; more are left: press Cancel again." if more else "."
    )
    return _done(request, message, reverse("queues:batch", args=[batch_id]))


@post_only
@action_required("retry_task", "retry_all_failed")
def batch_retry(request, batch_id):
    """Retry the batch's failed tasks, looking at up to 5,000 of its tasks a press (needs
    ``retry_all_failed`` too, as a bulk retry of "all matching" a search does)."""
    try:
        _check_batch(batch_id)
        start = _start(request.POST.get("from"))
    except BadInput as exc:
        return _refused(request, exc)
    retried, next_from = batch_actions.retry_failed(client(), batch_id, start)
    _audit(request, "batch_retry", detail=f"batch {batch_id}: {retried} tasks from {start}")
    back = reverse("queues:batch", args=[batch_id])
    if next_from is None:
        return _done(request, f"Batch {batch_id}: {retried} failed tasks queued again.", back)
    message = f"Batch {batch_id}: {retried} failed tasks queued again; more to look at: press Retry again."
    onward = back + "?" + urlencode({"retry_from": next_from})
    if wants_json(request):  # the page's script goes to the page whose Retry goes on from there
        return JsonResponse({"ok": True, "message": message, "url": onward})
    return _done(request, message, onward)
