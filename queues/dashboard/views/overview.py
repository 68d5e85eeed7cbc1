"""The overview page: every queue's counts, totals, throughput, workers online."""

from .. import queries
from ..access import staff_required
from .common import client, live_path, render_page


@staff_required
def overview(request):
    snapshot = queries.overview(client())
    return render_page(
        request,
        "queues/overview.html",
        {
            "title": "Queues",
            "snap": snapshot,
            "live": live_path("overview"),
        },
    )
