"""The workers page: every live worker, its queues, slots, heartbeat, counts and resources,
and the workers gone lately; and one worker's page: its tasks in process with their progress.
Its Quiet and Stop buttons (``control_workers``) send the worker an order (``engine.orders``)."""

from django.urls import reverse

from ...engine import keys, orders, readmodel
from ...quoting import shown
from .. import queries
from ..access import action_required, post_only, staff_required
from .actions import _audit, _done, _refused
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


#: order in the URL -> what the message says it did (audited as worker_<order>)
WORKER_ORDERS = {
    "quiet": "told to go quiet: it takes no more tasks",
    "stop": "told to stop: it exits once its tasks end",
}


def _worker_order(order):
    @post_only
    @action_required("control_workers")
    def view(request, name):
        try:
            try:
                keys.check_worker_name(name)
            except ValueError:
                raise BadInput(f"{shown(name)} is not a worker name.") from None
            if readmodel.worker(client(), name) is None:
                raise BadInput(f"There is no worker {shown(name)} online.", status=404)
            orders.tell_worker(client(), name, order)
        except BadInput as exc:
            return _refused(request, exc)
        _audit(request, f"worker_{order}", detail=f"worker {name}")
        return _done(request, f"Worker {name} {WORKER_ORDERS[order]}.", reverse("queues:worker", args=[name]))

    view.__name__ = f"worker_{order}"
    return view


worker_quiet, worker_stop = (_worker_order(o) for o in WORKER_ORDERS)
