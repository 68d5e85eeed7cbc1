"""The task page, its whole log (as text) and the look-up by id."""

from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from ...conf import get_connection
from ...engine import crypto, readmodel
from .. import graphs, queries
from ..access import staff_required
from .common import BadInput, check_task_id, client, handles_bad_input, live_path, render_page


@staff_required
@handles_bad_input
def lookup(request):
    """``?id=<task id>``: to the task's page (400 if it is no task id)."""
    task_id = (request.GET.get("id") or "").strip()
    if not task_id:
        raise BadInput("Give a task id to look up.")
    check_task_id(task_id)
    return redirect(reverse("queues:task", args=[task_id]))


@staff_required
@handles_bad_input
def task(request, task_id):
    check_task_id(task_id)
    full = request.GET.get("full") == "1"
    snapshot = queries.task(client(), task_id, full=full)
    if not queries.shows_task(snapshot):  # as its live feed is closed with 4404 (feeds.feed_for)
        raise BadInput(
            f"There is no task {task_id} (finished tasks are deleted, unless their result is kept).", status=404
        )
    return render_page(
        request,
        "queues/task.html",
        {
            "title": f"Task {task_id}",
            "task_id": task_id,
            "queue": snapshot["queue"],
            "snap": snapshot,
            "opened": _opened(request, snapshot),
            "live": live_path("task", task_id),
            "full": full,
        },
    )


def _opened(request, snapshot):
    """An encrypted queue's payload, opened for a user with ``queues.view_encrypted_payload``
    (as text; None for others, who see "encrypted"). Outside the live sections: the page's live
    feed is shared by every viewer, so it never carries a payload opened for one."""
    if not (snapshot["task"] and snapshot["task"]["sealed"]) or not request.user.has_perm(
        "queues.view_encrypted_payload"
    ):
        return None
    found = readmodel.task(client(), snapshot["id"])
    if found is None:  # it ended: its record keeps the ciphertext (or only its head)
        record = readmodel.ended_task(client(), snapshot["id"])
        if record is None:
            return None
        if record.payload_size:
            return f"(the record of this ended task keeps only part of its {record.payload_size} encrypted bytes)"
        found = record.task
    try:
        payload = crypto.open_payload(get_connection().config, found)
    except crypto.PayloadUnreadable as exc:
        return f"(no key opens it: {exc})"
    return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload


@staff_required
@handles_bad_input
def log(request, task_id):
    """The task's whole log (the last ``keys.TASK_LOG_MAX`` lines Redis keeps), as plain text: the
    task page shows its last lines; once it ended, the last lines its record keeps."""
    check_task_id(task_id)
    lines = readmodel.task_log(client(), task_id)
    if not lines and (record := readmodel.ended_task(client(), task_id)) is not None:
        lines = record.log  # ended: the last lines its record keeps
    response = HttpResponse("".join(f"{line}\n" for line in lines), content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    return response


@staff_required
@handles_bad_input
def workflow(request, task_id):
    """A workflow's graph from a task: the parents it still waits for, itself and its
    descendants (``after=``), at most ``queries.GRAPH_NODES`` tasks."""
    check_task_id(task_id)
    read = queries.workflow_graph(client(), task_id)
    return render_page(
        request,
        "queues/workflow.html",
        {
            "title": f"Workflow of {task_id}",
            "task_id": task_id,
            "graph": graphs.of_reading(read, f"Workflow from task {task_id}"),
            "count": len(read["nodes"]),
            "more": read["more"],
            "max_nodes": queries.GRAPH_NODES,
        },
    )
