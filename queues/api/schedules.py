"""The schedules' endpoints: list (a page at a time), read, pause, resume, trigger, and create
(POST), change (PATCH) and delete (DELETE) a schedule made at run time (``queues.schedules`` over
HTTP).

A schedule's name follows the rules of queue names (400 otherwise); an unknown one is 404. Pause,
resume and trigger need ``manage_schedules``; create, change and delete ``change_schedule`` (a
schedule of the settings is changed there: 409, as is a name taken; a body key that is no
setting is a 400 naming it). Each writes an audit row in the same transaction.
"""

import bisect
import json

from django.urls import reverse

from ..conf import get_connection
from ..engine import keys, live_schedules, readmodel, schedules
from ..engine.errors import InvalidQueueName, InvalidSchedule, ScheduleNotFound
from ..engine.schedule_settings import KEYS
from ..quoting import shown
from ..webhooks import InvalidCallback, check_callback
from .auth import can_view
from .errors import BadRequest, Conflict, NotFound
from .http import endpoint, json_body, respond
from .paging import name_page
from .views import audited

#: Schedules per page of ``GET /api/schedules``, when not said (``limit``) and at most: those of
#: ``GET /api/queues``. A schedule can weigh megabytes (its payload is up to MAX_PAYLOAD_BYTES),
#: so a page also ends once the JSON of its schedules reaches ``PAGE_BYTES``: it is at most that
#: and one schedule more (each page holds one at least, so following ``next`` always moves on).
SCHEDULES_PAGE, SCHEDULES_PAGE_MAX = 100, 1000
PAGE_BYTES = 1024 * 1024
#: Schedules read from Redis in one round trip while a page is filled.
READ_CHUNK = 20


def schedule_json(schedule):
    return schedule.as_dict()


def known_schedule(name):
    """The schedule named in the URL: 400 for an invalid name, 404 for an unknown one."""
    try:
        keys.check_queue_name(name)
    except InvalidQueueName as exc:
        raise BadRequest(f"name: {str(exc).replace('queue name', 'schedule name')}", "name") from None
    found = schedules.get(get_connection().client, name)
    if found is None:
        raise NotFound(f"no schedule {name!r}")
    return found


def schedules_page(params):
    """(after, limit) of ``GET /api/schedules?after=<name>&limit=<n>`` (``paging.name_page``)."""
    return name_page(params, SCHEDULES_PAGE, SCHEDULES_PAGE_MAX, kind="schedule")


@endpoint(GET="view_dashboard")
def schedule_list(request, token):
    """One page of the schedules, by name: ``?after=<name>`` (the last of the page before: the
    answer's ``next``) and ``?limit=`` (``SCHEDULES_PAGE`` by default, ``SCHEDULES_PAGE_MAX`` at
    most; fewer once their JSON reaches ``PAGE_BYTES``), with ``total``. Reads the names, then the
    page's schedules only, ``READ_CHUNK`` at a time."""
    after, limit = schedules_page(request.GET)
    client = get_connection().client
    index = sorted(readmodel.schedule_index(client).items())
    start = bisect.bisect_right([name for name, _ in index], after) if after is not None else 0
    stop = min(start + limit, len(index))
    listed, size, end = [], 0, start
    while end < stop and size < PAGE_BYTES:
        for entry in readmodel.schedule_hashes(client, index[end : min(end + READ_CHUNK, stop)]):
            end += 1
            found = schedules.Schedule.from_hash(*entry)
            if found is None:  # deleted meanwhile
                continue
            listed.append(schedule_json(found))
            size += len(json.dumps(listed[-1]))
            if size >= PAGE_BYTES:
                break
    more = end < len(index)
    return respond({"schedules": listed, "next": index[end - 1][0] if more else None, "total": len(index)})


def known_keys(body):
    """Refuse a body key that is no schedule setting (``schedule_settings.KEYS``): 400 naming it
    (the first of them in ``field``), as every body of the API does."""
    unknown = [k for k in body if k not in KEYS]
    if unknown:
        listed = ", ".join(shown(k) for k in unknown)
        raise BadRequest(
            f"unknown field{'s' if len(unknown) > 1 else ''} {listed}; the fields are {', '.join(KEYS)}", unknown[0]
        )


@endpoint(GET="view_dashboard", POST="change_schedule", PATCH="change_schedule", DELETE="change_schedule")
def schedule(request, token, name):
    if request.method == "GET":
        return respond(schedule_json(known_schedule(name)))
    try:
        keys.check_queue_name(name)
    except InvalidQueueName as exc:
        raise BadRequest(f"name: {str(exc).replace('queue name', 'schedule name')}", "name") from None
    client = get_connection().client
    body = json_body(request) if request.method != "DELETE" else {}
    known_keys(body)  # before the call: a key such as "config" would be an argument of its own
    action = {"POST": "create", "PATCH": "update", "DELETE": "delete"}[request.method]
    queue = body.get("queue") if isinstance(body.get("queue"), str) else ""
    if body.get("callback") is not None:
        try:
            check_callback(body["callback"])
        except (InvalidCallback, TypeError) as exc:
            raise BadRequest(f"callback: {exc}", "callback") from None
    with audited(token, f"schedule_{action}", queue[:200], detail=f"schedule {name} via the HTTP API"):
        try:
            if action == "create":
                live_schedules.create(client, name, config=get_connection().config, **body)
            elif action == "update":
                live_schedules.update(client, name, config=get_connection().config, **body)
            else:
                live_schedules.delete(client, name)
        except ScheduleNotFound:
            raise NotFound(f"no schedule {name!r} made at run time") from None
        except InvalidSchedule as exc:
            if exc.field is None and ("exists already" in exc.reason or "declared in settings" in exc.reason):
                raise Conflict(str(exc)) from None
            raise BadRequest(str(exc), exc.field) from None
    if action == "delete":
        return respond({"name": name, "deleted": True})
    # the schedule as GET answers it needs view_dashboard: a write-only token reads nothing back
    shown_back = schedule_json(schedules.get(client, name)) if can_view(token) else {"name": name, action + "d": True}
    response = respond(shown_back, status=201 if action == "create" else 200)
    if action == "create":
        response["Location"] = reverse("queues-api:schedule", args=[name])
    return response


def _change(token, name, action):
    found = known_schedule(name)
    client = get_connection().client
    with audited(token, f"schedule_{action}", found.queue, detail=f"schedule {found.name} via the HTTP API"):
        try:
            getattr(schedules, action)(client, found.name)
        except ScheduleNotFound:
            raise NotFound(f"no schedule {found.name!r}") from None
    return respond({"name": found.name, "paused": action == "pause"})


@endpoint(POST="manage_schedules")
def pause(request, token, name):
    return _change(token, name, "pause")


@endpoint(POST="manage_schedules")
def resume(request, token, name):
    return _change(token, name, "resume")


@endpoint(POST="manage_schedules")
def trigger(request, token, name):
    found = known_schedule(name)
    with audited(token, "schedule_trigger", found.queue, detail=f"schedule {found.name} via the HTTP API") as entry:
        try:
            task_id = schedules.trigger(get_connection().client, found.name)
        except ScheduleNotFound:
            raise NotFound(f"no schedule {found.name!r}") from None
        entry.task_id = task_id
        entry.save(update_fields=["task_id"])
    response = respond({"name": found.name, "id": task_id}, status=201)
    response["Location"] = reverse("queues-api:task", args=[task_id])
    return response
