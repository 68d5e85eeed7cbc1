"""The queue page: pending (paged), delayed, in process, failed, locks, failure history; its
history page, and its failures page (every entry of the failure history, with its traceback)."""

from urllib.parse import urlencode

from ...engine import durations, readmodel
from ...quoting import shown
from .. import charts, queries, sections
from ..access import staff_required
from .common import BadInput, check_queue, check_task_id, client, handles_bad_input, live_path, page_of, render_page


def _span(request, param):
    """The span asked for in ``param`` (1h by default); BadInput for another."""
    span = request.GET.get(param) or "1h"
    if span not in readmodel.HISTORY_SPANS:
        raise BadInput(f"{param} must be one of {', '.join(readmodel.HISTORY_SPANS)}.")
    return span


def _timing_charts(name, span, counts=False, slot=None):
    read = queries.timings(client(), name, span, counts, slot)
    return charts.timing_charts(read["timings"], read["deploys"], read["history"])


def _handler(request, name):
    """The handler asked for in ``?handler=`` and its slot in the queue's timings, or (None,
    None): BadInput 400 for a name no handler can have, 404 for one the queue keeps none for."""
    handler = request.GET.get("handler")
    if handler is None or handler == "":
        return None, None
    if handler != durations.OTHER and not durations.is_handler_name(handler):
        raise BadInput(
            f"{shown(handler)} is not a handler name (a dotted path such as app.tasks.send_email, "
            f"at most {durations.HANDLER_NAME_MAX} characters, or {durations.OTHER})."
        )
    slot = readmodel.handler_slot(client(), name, handler)
    if slot is None:
        raise BadInput(f"Queue {shown(name)} has no charts for handler {shown(handler)}.", status=404)
    return handler, slot


@staff_required
@handles_bad_input
def queue(request, name):
    """The queue page; ``?charts=1h|24h|7d`` opens its run and wait time charts over that span,
    ``?handler=<name>`` those of one of its handlers (a Tasks framework function)."""
    check_queue(name)
    chart_span = _span(request, "charts")
    handler, slot = _handler(request, name)
    snapshot = queries.queue(client(), name, page_of(request))
    page = snapshot["pending"]["page"]
    # One tab shows at a time (?tab=delayed: no script needed); by default the first that has something.
    tab = request.GET.get("tab") or ("charts" if "charts" in request.GET or handler else "")
    if tab not in sections.QUEUE_TAB_NAMES:
        tab = sections.default_queue_tab(snapshot)
    return render_page(
        request,
        "queues/queue.html",
        {
            "title": f"Queue {name}",
            "queue": name,
            "snap": snapshot,
            "tab": tab,
            "live": live_path("queue", name, page=page if page > 1 else None),
            "timing_charts": _timing_charts(name, chart_span, counts=True, slot=slot),
            "chart_span": chart_span,
            "chart_open": "charts" in request.GET or handler is not None,
            "chart_handler": handler,
            "chart_handlers": [h for h, _ in readmodel.handlers(client(), name)],
            "spans": list(readmodel.HISTORY_SPANS),
        },
    )


@staff_required
@handles_bad_input
def history(request, name):
    """Throughput and failures over 1 h / 24 h / 7 d, depth over time and run-duration
    percentiles, drawn as SVG on the server (no script, no chart library)."""
    check_queue(name)
    span = _span(request, "span")
    snapshot = queries.history(client(), name, span)
    return render_page(
        request,
        "queues/history.html",
        {
            "title": f"History of {name}",
            "queue": name,
            "snap": snapshot,
            "span": span,
            "spans": list(readmodel.HISTORY_SPANS),
            "bars": sections.chart(snapshot["history"]),
            "depth": sections.depth_line(snapshot["history"]),
            "deploys": sections.deploy_marks(snapshot["history"], snapshot["deploys"]),
            "timing_charts": _timing_charts(name, span),
        },
    )


@staff_required
@handles_bad_input
def failures(request, name):
    """The failure history, newest first, page by page, each failure with its traceback (not
    live); ``?task=<id>``: that task's only; ``?shape=<key>``: one group's (the queue page's)."""
    check_queue(name)
    task_id = request.GET.get("task") or None
    if task_id:
        check_task_id(task_id)
    shape = (request.GET.get("shape") or "")[:2500] or None
    snapshot = queries.failures(client(), name, page_of(request), task_id=task_id, shape=shape)
    return render_page(
        request,
        "queues/failures.html",
        {
            "title": f"Failures of {name}",
            "queue": name,
            "snap": snapshot,
            "task_id": task_id,
            "shape": shape,
            "extra": "".join(f"{urlencode({k: v})}&" for k, v in (("task", task_id), ("shape", shape)) if v),
        },
    )
