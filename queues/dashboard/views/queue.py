"""The queue page: pending (paged), delayed, in process, failed, locks, failure history."""

from ...engine import readmodel
from ...engine.errors import InvalidInput
from .. import queries, sections
from ..access import staff_required
from ..feeds import parse_page
from .common import BadInput, check_queue, client, handles_bad_input, live_path, render_page


@staff_required
@handles_bad_input
def queue(request, name):
    check_queue(name)
    try:
        page = parse_page(request.GET.get("page"))
    except InvalidInput as exc:
        raise BadInput(str(exc)) from None
    snapshot = queries.queue(client(), name, page)
    page = snapshot["pending"]["page"]
    return render_page(
        request,
        "queues/queue.html",
        {
            "title": f"Queue {name}",
            "queue": name,
            "snap": snapshot,
            "live": live_path("queue", name, page=page if page > 1 else None),
        },
    )


@staff_required
@handles_bad_input
def history(request, name):
    """Throughput and failures over 1 h / 24 h / 7 d, depth over time and run-duration
    percentiles, drawn as SVG on the server (no script, no chart library)."""
    check_queue(name)
    span = request.GET.get("span") or "1h"
    if span not in readmodel.HISTORY_SPANS:
        raise BadInput(f"span must be one of {', '.join(readmodel.HISTORY_SPANS)}.")
    snapshot = queries.history(client(), name, span)
    return render_page(
        request,
        "queues/history.html",
        {
            "title": f"History of {name}",
            "queue": name,
            "snap": snapshot,
            "span": span,
            "spans": list(readmodel.HISTORY_SPANS),
            "bars": sections.chart(snapshot["history"]),
            "depth": sections.depth_line(snapshot["history"]),
        },
    )
