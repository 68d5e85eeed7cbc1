"""The queue page: pending (paged), delayed, in process, failed, locks, failure history."""

from ...engine.errors import InvalidInput
from .. import queries
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
