"""The Batches page (every batch with a live progress bar) and a batch's page (its progress,
callbacks and one page of its tasks with their states)."""

from ...engine import keys
from .. import graphs, queries
from ..access import staff_required
from ..feeds import parse_page
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


@staff_required
@handles_bad_input
def batch(request, batch_id):
    if not keys.is_batch_id(batch_id):
        raise BadInput(f"{batch_id[:40]!r} is not a batch id (b- and 16 hex digits).")
    page = _page(request)
    snapshot = queries.batch(client(), batch_id, page)
    if snapshot["batch"] is None:
        raise BadInput(f"There is no batch {batch_id}.", status=404)
    return render_page(
        request,
        "queues/batch.html",
        {
            "title": f"Batch {batch_id}",
            "batch_id": batch_id,
            "snap": snapshot,
            "live": live_path("batch", batch_id, page=page),
            "graph": graphs.of_reading(queries.batch_graph(client(), batch_id), f"Tasks of batch {batch_id}"),
        },
    )
