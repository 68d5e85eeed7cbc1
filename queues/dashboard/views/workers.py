"""The workers page: every live worker, its queues, slots, heartbeat and counts."""

from .. import queries
from ..access import staff_required
from .common import client, live_path, render_page


@staff_required
def workers(request):
    c = client()
    snapshot = {"view": "workers", "now_ms": queries.server_ms(c), "workers": queries.workers(c)}
    return render_page(
        request,
        "queues/workers.html",
        {
            "title": "Workers",
            "snap": snapshot,
            "live": live_path("workers"),
        },
    )
