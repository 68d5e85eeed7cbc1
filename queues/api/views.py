"""The endpoints: tasks (create, read, cancel/delete) and queues (list, read, pause, resume,
limits).

Reads go through the engine's read model and ``Queue``; every state change writes an AuditLog
row with the token in the same database transaction as the change is made, so a change that
fails leaves no audit row (the Redis side of each change is one atomic script).
"""

import bisect
import json
import re
from contextlib import contextmanager

from django.db import transaction
from django.urls import reverse

from ..conf import get_connection
from ..engine import Queue, keys, readmodel
from ..engine.errors import InvalidState, TaskNotFound
from ..models import AuditLog
from ..quoting import shown
from .auth import can_view, permissions_of
from .bodies import CREATE_TASK, create_options, limits_body, queue_name, queues_page
from .errors import Forbidden, NotFound
from .http import endpoint, json_body, respond

#: States a DELETE cancels (permission cancel_task); the others are deleted (delete_task).
CANCELLABLE = ("pending", "delayed", "waiting", "blocked", "active")


@contextmanager
def audited(token, action, queue, task_id="", detail=""):
    """Write the audit row and make the change in one transaction: no row if the change fails."""
    with transaction.atomic():
        entry = AuditLog.objects.create(
            token=token, action=action, queue=queue, task_id=task_id, detail=detail or "via the HTTP API"
        )
        yield entry


# -- tasks ---------------------------------------------------------------------------------


def task_json(task):
    d = task.as_dict()
    return {
        "id": task.id,
        "queue": task.queue,
        "payload": d["payload"],
        "state": task.state,
        "attempts": task.attempt,
        "retries": task.retries,
        "timeout": task.timeout,
        "backoff": task.backoff,
        "callback": task.callback,
        "worker": task.worker,
        "error": task.error,
        "created_at": d["created_at"],
        "due_at": d["due_at"],
        "started_at": d["started_at"],
        "failed_at": d["failed_at"],
        "finished_at": d["finished_at"],
        "cancel_requested": task.cancel_requested,
        "tags": d["tags"],
        "progress": d["progress"],
        "checkpoint": d["checkpoint"],
        "checkpoint_saved_at": d["checkpoint_saved_at"],
        "runs": task.runs,
    }


def create_task(token, body, spec=CREATE_TASK):
    """Validate a create body (``spec``: its fields) and enqueue it; returns the task id."""
    queue, payload, options = create_options(body, spec)
    with audited(token, "enqueue", queue, detail=json.dumps(options, sort_keys=True)) as entry:
        task_id = Queue(queue, get_connection()).enqueue(payload, **options)
        entry.task_id = task_id
        entry.save(update_fields=["task_id"])
    return task_id


def find_task(task_id):
    """The task, else NotFound: saying how it ended (``outcome``, ``reason``, ``parents``) when
    its links kept that (a task cancelled because of a parent, or one that had children)."""
    client = get_connection().client
    task = readmodel.task(client, task_id)
    if task is None:
        queue = keys.queue_from_task_id(task_id)
        info = readmodel.links(client, queue, task_id) if queue else None
        if info and info["outcome"]:
            reason = info["why"] or ""
            err = NotFound(f"task {task_id} is gone: {info['outcome']}" + (f": {reason}" if reason else ""))
            parent = _REASON_PARENT.fullmatch(reason)
            err.extra = {"outcome": info["outcome"], "reason": reason, "parents": [parent.group(1)] if parent else []}
            raise err
        raise NotFound(f"no task {shown(task_id)} (unknown, or finished and gone)")
    return task


_REASON_PARENT = re.compile(r"parent (\S+) (?:completed|failed|cancelled|deleted)")


def may_remove_tasks(token):
    """403, before anything is looked at, for a token with neither ``cancel_task`` nor
    ``delete_task``; returns the token's permissions."""
    held = permissions_of(token)
    if not held & {"cancel_task", "delete_task"}:
        raise Forbidden(f"token {shown(token.name)} lacks the permissions queues.cancel_task and queues.delete_task")
    return held


def removable_task(token, task_id):
    """The task a DELETE (or the seed's /delete) removes, the rights checked before the task is
    looked at (``may_remove_tasks``). A token without ``view_dashboard`` gets one same 403 for an
    unknown (or gone) task and for one whose removal needs the right it lacks, so it learns no
    task's state; holding both rights, it gets a bare 404 for an unknown one."""
    held = may_remove_tasks(token)
    sees = "view_dashboard" in held
    try:
        task = find_task(task_id)
    except NotFound:
        if sees:
            raise  # the full answer: how it ended, and why
        if held >= {"cancel_task", "delete_task"}:
            raise NotFound(f"no task {shown(task_id)} (unknown, or finished and gone)") from None
        raise _not_removable(token, task_id) from None
    needed = "cancel_task" if task.state in CANCELLABLE else "delete_task"
    if needed not in held:
        if sees:
            raise Forbidden(f"token {shown(token.name)} lacks the permission queues.{needed}")
        raise _not_removable(token, task_id)
    return task


def _not_removable(token, task_id):
    return Forbidden(
        f"token {shown(token.name)} may not remove task {shown(task_id)}: cancelling a pending, delayed, waiting, "
        "blocked or running task needs queues.cancel_task, deleting a failed or completed one queues.delete_task "
        "(without queues.view_dashboard, an unknown task gets this same answer)"
    )


def remove_task(token, task_id):
    """Cancel a pending, delayed, waiting or running task; delete a failed or completed one
    (the dashboard's rules); returns the response body."""
    task = removable_task(token, task_id)
    q = Queue(task.queue, get_connection())
    if task.state in CANCELLABLE:
        with audited(token, "cancel", task.queue, task.id):
            if not q.cancel(task.id):
                raise NotFound(f"task {task.id} finished before it could be cancelled")
        result = "cancelled"
    else:
        with audited(token, "delete", task.queue, task.id):
            q.delete(task.id, finished_only=True)  # retried meanwhile: 409, not a pending task deleted
        result = "deleted"
    return {"id": task.id, "queue": task.queue, "result": result}


@endpoint(POST="enqueue_task")
def tasks(request, token):
    task_id = create_task(token, json_body(request))
    response = respond({"id": task_id}, status=201)
    response["Location"] = reverse("queues-api:task", args=[task_id])
    return response


@endpoint(GET="view_dashboard", DELETE=None)
def task(request, token, task_id):
    if request.method == "DELETE":
        return respond(remove_task(token, task_id))
    client = get_connection().client
    record = None if readmodel.task(client, task_id) else readmodel.ended_task(client, task_id)
    if record is not None:  # ended: its record (the last log lines it kept)
        data = task_json(record.task)
        data["log"] = record.log
        if record.reason:  # cancelled because of a parent's end
            parent = _REASON_PARENT.fullmatch(record.reason)
            data.update(reason=record.reason, parents=[parent.group(1)] if parent else [])
        return respond(data)
    found = find_task(task_id)
    data = task_json(found)
    data["log"] = readmodel.task_log(client, found.id)
    return respond(data)


@endpoint(POST="retry_task")
def task_run_now(request, token, task_id):
    """Run a delayed task now, before every pending task (the dashboard's Run now). A token
    without ``view_dashboard`` gets one same 404 for an unknown task and for one that is not
    delayed, so it learns no task's state (as DELETE: ``removable_task``)."""
    queue = keys.queue_from_task_id(task_id)
    if queue is None:
        raise NotFound(f"no task {shown(task_id)}")
    try:
        with audited(token, "run_now", queue, task_id):
            Queue(queue, get_connection()).run_now(task_id)
    except (TaskNotFound, InvalidState):
        if "view_dashboard" in permissions_of(token):
            raise  # the full answer: unknown (404) or no longer delayed (409)
        raise NotFound(f"no delayed task {shown(task_id)} (unknown, gone, or not delayed)") from None
    return respond({"id": task_id, "queue": queue, "state": "pending"})


# -- queues --------------------------------------------------------------------------------


def queue_json(counts, workers):
    counts = dict(counts)
    name, paused = counts.pop("name"), counts.pop("paused")
    counts.pop("served", None)  # the dashboard's mark; the API's body keeps its shape
    serving = [
        {
            k: w.get(k)
            for k in (
                "name",
                "host",
                "pid",
                "concurrency",
                "active",
                "processed",
                "failed",
                "started_at",
                "heartbeat_age",
            )
        }
        for w in workers
        if name in w.get("queues", ())
    ]
    return {"name": name, "paused": paused, "counts": counts, "workers": serving}


def known_queue(name):
    """The Queue named in the URL: 400 if the name is invalid, 404 if it never had tasks or workers."""
    name = queue_name(name)
    client = get_connection().client
    if not readmodel.queue_exists(client, name):
        raise NotFound(f"no queue {shown(name)}")
    return Queue(name, get_connection())


@endpoint(GET="view_dashboard")
def queues(request, token):
    """One page of the queues, by name: ``?after=<name>`` (the last of the page before: the
    answer's ``next``) and ``?limit=`` (100 by default, 1,000 at most), with ``total``. Reads the
    names and the counts of the page's queues only."""
    after, limit = queues_page(request.GET)
    client = get_connection().client
    names = readmodel.known_queues(client)
    start = bisect.bisect_right(names, after) if after is not None else 0
    page = names[start : start + limit]
    workers = readmodel.workers(client)
    listed = [queue_json(dict(c, name=n), workers) for n, c in zip(page, readmodel.counts_of(client, page))]
    more = start + limit < len(names)
    return respond({"queues": listed, "next": page[-1] if more and page else None, "total": len(names)})


@endpoint(GET="view_dashboard")
def queue(request, token, name):
    q = known_queue(name)
    client = q.client
    counts = dict(readmodel.queue_counts(client, q.name), name=q.name)
    return respond(queue_json(counts, readmodel.workers(client)))


@endpoint(POST="pause_queue")
def pause(request, token, name):
    q = known_queue(name)
    with audited(token, "pause", q.name):
        q.pause()
    return respond({"name": q.name, "paused": True})


@endpoint(POST="pause_queue")
def resume(request, token, name):
    q = known_queue(name)
    with audited(token, "resume", q.name):
        q.resume()
    return respond({"name": q.name, "paused": False})


def limits_json(q):
    return dict(q.limits(), name=q.name)


@endpoint(GET="view_dashboard", PUT="manage_limits")
def limits(request, token, name):
    """GET the queue's limits and their use; PUT overrides (null: no limit; reset: drop them first)."""
    q = known_queue(name)
    if request.method == "GET":
        return respond(limits_json(q))
    reset, given = limits_body(json_body(request))
    if given or reset:
        detail = json.dumps(
            {"reset": reset, **{k: (None if v is None else _shown_limit(v)) for k, v in given.items()}},
            sort_keys=True,
        )
        with audited(token, "set_limits", q.name, detail=detail):
            q.set_limits(reset=reset, **given)
    if not can_view(token):  # the limits' use is what GET answers, for view_dashboard
        return respond({"name": q.name, "updated": bool(given or reset)})
    return respond(limits_json(q))


def _shown_limit(value):
    return [value.starts, value.seconds] if hasattr(value, "starts") else value
