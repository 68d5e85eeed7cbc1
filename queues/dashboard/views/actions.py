"""The dashboard's actions: POST only (CSRF-checked by Django's middleware), each behind its own
permission (deleting a task that has not run removes it like a cancel: it needs ``cancel_task``
too, as the API and bulk actions do), each recorded in the audit log. Input is checked before it reaches Redis; an
action that cannot be done answers 400/404/409 with a message, never 500.

A form post is answered with a redirect back (``next``) and a message; a request that accepts
JSON (the page's script) gets ``{"ok": bool, "message": str}``.
"""

import re

from django.contrib import messages
from django.http import HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from ...engine import Queue, keys
from ...engine.errors import InvalidInput, InvalidState, NotFinished, TaskNotFound
from ...models import AuditLog
from ...quoting import shown
from ..access import action_required, can_act, post_only, wants_json
from .common import BadInput, check_queue, check_task_id, error_page, render_page

# action name in the URL -> (permission, engine call, message)
TASK_ACTIONS = {
    "cancel": ("cancel_task", "cancel", "cancelled"),
    "retry": ("retry_task", "retry", "queued again"),
    "delete": ("delete_task", "delete", "deleted"),
    # a delayed task, made runnable at once ahead of the pending ones: like a retry, it queues a task
    "run-now": ("retry_task", "run_now", "moved to the front of the queue: it runs next"),
}
QUEUE_ACTIONS = {
    "pause": ("pause_queue", "pause"),
    "resume": ("pause_queue", "resume"),
    "purge": ("purge_queue", "purge"),
    "retry-all": ("retry_all_failed", "retry_all"),
}


def _done(request, message, fallback, level=messages.SUCCESS):
    if wants_json(request):
        return JsonResponse({"ok": True, "message": message})
    messages.add_message(request, level, message)
    target = request.POST.get("next") or ""
    # A path of this site only ("x" made redirect() look for a URL pattern named so: a 500 after
    # the action was done); the address as given, never resolved as a name.
    if not target.startswith("/") or not url_has_allowed_host_and_scheme(
        target, {request.get_host()}, request.is_secure()
    ):
        target = fallback
    return HttpResponseRedirect(target)


def _refused(request, exc):
    if wants_json(request):
        return JsonResponse({"ok": False, "message": exc.message}, status=exc.status)
    return error_page(request, exc)


def _audit(request, action, queue="", task_id="", detail=""):
    AuditLog.objects.create(user=request.user, action=action, queue=queue, task_id=task_id, detail=detail)


def _cancel(queue, task_id):
    """Cancel a task; True if it was running (its worker is told to stop it), False if it was
    removed before it ran."""
    outcome = queue.cancel_outcome(task_id)
    if outcome is None:
        raise BadInput(f"There is no task {shown(task_id)} to cancel (it may have finished).", status=404)
    return outcome == "stopping"


def _confirm_delete(request, task_id):
    """The page that asks before a single Delete (the page's script asks in a dialog instead)."""
    target = request.POST.get("next") or ""
    return render_page(
        request,
        "queues/confirm_delete.html",
        {"title": f"Delete task {task_id}?", "task_id": task_id, "next": target if target.startswith("/") else ""},
    )


def _task_action(action):
    codename, method, verb = TASK_ACTIONS[action]

    @post_only
    @action_required(codename)
    def view(request, task_id):
        try:
            check_task_id(task_id)
            name = keys.queue_from_task_id(task_id)
            if action == "delete" and request.POST.get("confirm") != "yes":
                if wants_json(request):
                    raise BadInput(f"Deleting task {task_id} cannot be undone: send confirm=yes to confirm.")
                return _confirm_delete(request, task_id)
            queue = Queue(name)
            try:
                running = False
                if action == "cancel":
                    running = _cancel(queue, task_id)
                elif action == "delete":  # a task that has not run: removing it is a cancel
                    queue.delete(task_id, finished_only=not can_act(request.user, "cancel_task"))
                elif action == "run-now":
                    queue.run_now(task_id)
                else:
                    queue.retry(task_id)
            except TaskNotFound:
                raise BadInput(f"There is no task {shown(task_id)}.", status=404) from None
            except NotFinished:
                raise BadInput(
                    f"Task {task_id} has not run yet: removing it is a cancel, which needs the queues.cancel_task "
                    "permission.",
                    status=403,
                ) from None
            except InvalidState as exc:
                raise BadInput(str(exc), status=409) from None
            except InvalidInput as exc:
                raise BadInput(str(exc)) from None
        except BadInput as exc:
            return _refused(request, exc)
        _audit(request, method, name, task_id, "stopping (it was running)" if running else "")
        message = f"Task {task_id} {verb}" + (": stopping it (it was running)." if running else ".")
        return _done(request, message, reverse("queues:queue", args=[name]))

    view.__name__ = f"task_{action.replace('-', '_')}"
    return view


def _queue_action(action):
    codename, method = QUEUE_ACTIONS[action]

    @post_only
    @action_required(codename)
    def view(request, name):
        try:
            check_queue(name)
            if action == "purge" and request.POST.get("confirm", "") != name:
                raise BadInput(f"To purge, type the queue's name ({name}) in the confirmation box.")
        except BadInput as exc:
            return _refused(request, exc)
        result = getattr(Queue(name), method)()
        if action in ("pause", "resume"):
            message = f"Queue {name} {action}d." if result else f"Queue {name} was already {action}d."
            detail = "" if result else "no change"
        else:
            noun = "pending tasks purged" if action == "purge" else "failed tasks queued again"
            message, detail = f"Queue {name}: {result} {noun}.", f"{result} tasks"
        _audit(request, method, name, "", detail)
        return _done(request, message, reverse("queues:queue", args=[name]))

    view.__name__ = f"queue_{action.replace('-', '_')}"
    return view


task_cancel, task_retry, task_delete, task_run_now = (_task_action(a) for a in TASK_ACTIONS)
queue_pause, queue_resume, queue_purge, queue_retry_all = (_queue_action(a) for a in QUEUE_ACTIONS)


# -- limits ------------------------------------------------------------------------------------

#: The limits form's fields; blank means "no limit".
LIMIT_FIELDS = ("concurrency", "rate", "partition_concurrency", "partition_rate")


#: Numbers the form takes: ASCII digits only (``isdigit`` and ``int`` take "²" and "１"), and
#: short enough for ``int`` (past 4,300 digits it raises) and far past any limit's maximum.
_WHOLE = re.compile(r"[0-9]{1,18}")
_SECONDS = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})?|\.[0-9]{1,9}")


def _form_limit(name, raw):
    """A limit from the form's text: blank is None (no limit); a rate is "100/m" or "<starts>,<seconds>"."""
    raw = (raw or "").strip()
    if not raw:
        return None
    if name.endswith("concurrency"):
        if not _WHOLE.fullmatch(raw):
            raise BadInput(f"{name}: must be a whole number from 1 up, or blank for no limit.")
        return int(raw)
    if "," in raw:
        starts, _, seconds = (part.strip() for part in raw.partition(","))
        if not (_WHOLE.fullmatch(starts) and _SECONDS.fullmatch(seconds)):
            raise BadInput(f'{name}: give "<starts>,<seconds>" or "100/m", "10/s", "500/h".')
        return (int(starts), float(seconds))
    return raw


@post_only
@action_required("manage_limits")
def queue_limits(request, name):
    """Change the queue's limits (every field of the form; blank: no limit), or reset them."""
    try:
        check_queue(name)
        q = Queue(name)
        if request.POST.get("reset"):
            q.set_limits(reset=True)
            detail, message = "reset", f"Queue {name}: limits back to the handler's."
        else:
            given = {f: _form_limit(f, request.POST.get(f)) for f in LIMIT_FIELDS}
            q.set_limits(**given)
            detail = ", ".join(f"{k}={'none' if v is None else v}" for k, v in given.items())
            message = f"Queue {name}: limits set ({detail})."
    except InvalidInput as exc:
        return _refused(request, BadInput(str(exc)))
    except BadInput as exc:
        return _refused(request, exc)
    _audit(request, "set_limits", name, "", detail)
    return _done(request, message, reverse("queues:queue", args=[name]))
