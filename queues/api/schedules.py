"""The schedules' endpoints: list, read, pause, resume, trigger, and create (POST), change
(PATCH) and delete (DELETE) a schedule made at run time (``queues.schedules`` over HTTP).

A schedule's name follows the rules of queue names (400 otherwise); an unknown one is 404. Pause,
resume and trigger need ``manage_schedules``; create, change and delete ``change_schedule`` (a
schedule of the settings is changed there: 409, as is a name taken). Each writes an audit row
in the same transaction.
"""

from django.urls import reverse

from ..conf import get_connection
from ..engine import keys, live_schedules, schedules
from ..engine.errors import InvalidQueueName, InvalidSchedule, ScheduleNotFound
from ..webhooks import InvalidCallback, check_callback
from .errors import BadRequest, Conflict, NotFound
from .http import endpoint, json_body, respond
from .views import audited


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


@endpoint(GET="view_dashboard")
def schedule_list(request, token):
    return respond({"schedules": [schedule_json(s) for s in schedules.all(get_connection().client)]})


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
    response = respond(schedule_json(schedules.get(client, name)), status=201 if action == "create" else 200)
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
