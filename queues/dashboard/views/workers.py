"""The workers page: every live worker, its queues, slots, heartbeat, counts and resources,
and the workers gone lately; and one worker's page: its tasks in process with their progress."""

from ...engine import keys
from ...quoting import shown
from .. import queries
from ..access import staff_required
from .common import BadInput, client, handles_bad_input, live_path, render_page


@staff_required
def workers(request):
    c = client()
    snapshot = {
        "view": "workers",
        "now_ms": queries.server_ms(c),
        "workers": queries.workers(c),
        "gone": queries.gone_workers(c),
    }
    return render_page(
        request,
        "queues/workers.html",
        {
            "title": "Workers",
            "snap": snapshot,
            "live": live_path("workers"),
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
