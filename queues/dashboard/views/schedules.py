"""The Schedules page: every schedule, its timing in words, next run (with a live countdown),
last run and its outcome, paused state, and the pause / resume / trigger actions."""

from .. import schedules as page
from ..access import staff_required
from .common import client, handles_bad_input, live_path, page_of, render_page


@staff_required
@handles_bad_input
def schedules(request):
    snapshot = page.snapshot(client(), page_of(request))
    number = snapshot["schedules"]["page"]
    return render_page(
        request,
        "queues/schedules.html",
        {
            "title": "Schedules",
            "snap": snapshot,
            "live": live_path("schedules", page=number if number > 1 else None),
        },
    )
