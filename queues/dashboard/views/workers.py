"""The workers page: every live worker, its queues, slots, heartbeat, counts and resources,
and the workers gone lately; and one worker's page: its tasks in process with their progress."""

from ...engine import keys
from ...quoting import shown
from .. import queries
from ..access import staff_required
from .common import BadInput, client, handles_bad_input, live_path, page_of, render_page


@staff_required
@handles_bad_input
def workers(request):
    snapshot = queries.workers_view(client(), page_of(request))
    page = snapshot["workers"]["page"]
    return render_page(
        request,
        "queues/workers.html",
        {
            "title": "Workers",
            "snap": snapshot,
            "live": live_path("workers", page=page if page > 1 else None),
        },
    )


@staff_required
@handles_bad_input
def worker(request, name):
    try:
        keys.check_worker_name(name)
    except ValueError:
        raise BadInput(f"{shown(name)} is not a worker name.") from None
    snapshot = queries.worker(client(), name)
    if snapshot["worker"] is None and snapshot["gone"] is None:
        raise BadInput(f"There is no worker {shown(name)} (online or gone lately).", status=404)
    return render_page(
        request,
        "queues/worker.html",
        {"title": f"Worker {name}", "worker_name": name, "snap": snapshot, "live": live_path("worker", name)},
    )
