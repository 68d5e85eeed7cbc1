"""One schedule's page (its name links here from the Schedules page)."""

from ...engine import keys
from .. import schedule_page
from ..access import staff_required
from .common import BadInput, client, handles_bad_input, render_page


@staff_required
@handles_bad_input
def schedule(request, name):
    try:
        keys.check_queue_name(name)
    except ValueError:
        raise BadInput("That is no schedule name.") from None
    snapshot = schedule_page.snapshot(client(), name)
    if snapshot is None:
        raise BadInput(f"There is no schedule {name!r}.", status=404)
    return render_page(request, "queues/schedule.html", {"title": f"Schedule {name}", "snap": snapshot, "live": ""})
