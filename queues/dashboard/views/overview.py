"""The overview page: the queues page by page with their counts, the totals, throughput and
workers online."""

from .. import queries
from ..access import staff_required
from .common import client, handles_bad_input, live_path, page_of, render_page


@staff_required
@handles_bad_input
def overview(request):
    snapshot = queries.overview(client(), page_of(request))
    page = snapshot["queues"]["page"]
    return render_page(
        request,
        "queues/overview.html",
        {
            "title": "Queues",
            "snap": snapshot,
            "live": live_path("overview", page=page if page > 1 else None),
        },
    )
