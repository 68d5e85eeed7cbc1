""" "Run again": a new task with the payload and options of one that ended (its record kept) or
failed for good, noted as a run again of it. POST only, CSRF-checked, behind
``queues.enqueue_task`` (what enqueueing a task needs anywhere), audited."""

from django.urls import reverse

from ...engine import history, keys
from ..access import action_required, post_only
from .actions import _audit, _done, _refused
from .common import BadInput, check_task_id, client

REFUSALS = {
    "unknown": ("There is no task {id} to run again (its record may have been pruned).", 404),
    "running": ("Task {id} has not ended: only an ended or failed task is run again.", 409),
    "cut": ("Task {id}'s payload was kept only in part: it can't be run again.", 409),
}


@post_only
@action_required("enqueue_task")
def task_run_again(request, task_id):
    try:
        check_task_id(task_id)
        outcome = history.run_again(client(), [task_id])[task_id]
        if outcome in REFUSALS:
            text, status = REFUSALS[outcome]
            raise BadInput(text.format(id=task_id), status=status)
    except BadInput as exc:
        return _refused(request, exc)
    _audit(request, "run_again", keys.queue_from_task_id(task_id), task_id, f"as {outcome}")
    return _done(request, f"Task {task_id} run again as {outcome}.", reverse("queues:task", args=[outcome]))
