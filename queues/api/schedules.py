"""The schedules' endpoints: list, read, pause, resume, trigger (``queues.schedules`` over HTTP).

A schedule's name follows the rules of queue names (400 otherwise); an unknown one is 404. Pause,
resume and trigger need ``manage_schedules`` and write an audit row in the same transaction.
"""

from django.urls import reverse

from ..conf import get_connection
from ..engine import keys, schedules
from ..engine.errors import InvalidQueueName, ScheduleNotFound
from .errors import BadRequest, NotFound
from .http import endpoint, respond
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


@endpoint(GET="view_dashboard")
def schedule(request, token, name):
    return respond(schedule_json(known_schedule(name)))


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
