"""The Schedules page: every schedule, its timing in words, next run (with a live countdown),
last run and its outcome, paused state, and the pause / resume / trigger actions."""

from .. import schedules as page
from ..access import staff_required
from .common import client, live_path, render_page


@staff_required
def schedules(request):
    return render_page(
        request,
        "queues/schedules.html",
        {
            "title": "Schedules",
            "snap": page.snapshot(client()),
            "live": live_path("schedules"),
        },
    )
