"""The Failures tab: every queue's tasks failed for good, grouped by error shape."""

from .. import queries
from ..access import staff_required
from .common import client, handles_bad_input, render_page


@staff_required
@handles_bad_input
def failures_all(request):
    snapshot = queries.failures_all(client())
    return render_page(request, "queues/failures_all.html", {"title": "Failures", "snap": snapshot, "live": ""})
