"""The seed's own routes, so a client written for it only changes its base URL (and sends a
token): ``POST /create``, ``/query`` and ``/delete`` with its field names (``topic``,
``content``, ``retry``) and reply shapes, and 200 on success as it answered.
"""

from .bodies import BY_ID, SEED_CREATE
from .http import endpoint, json_body, respond
from .views import create_task, find_task, may_remove_tasks, remove_task


def _seconds(dt):
    return int(dt.timestamp()) if dt else None


def seed_json(task):
    """A task in the seed's shape (its spellings kept), plus ``state`` and ``error``."""
    payload = task.as_dict()["payload"]
    return {
        "id": task.id,
        "topic": task.queue,
        "content": payload,
        "callback": task.callback,
        "execute_time": _seconds(task.due_at or task.created_at),
        "creat_time": _seconds(task.created_at),
        "max_retry": task.retries,
        "has_retry": max(task.attempt - 1, 0),
        "state": task.state,
        "error": task.error,
    }


@endpoint(POST="enqueue_task")
def create(request, token):
    return respond({"id": create_task(token, json_body(request), SEED_CREATE)})


@endpoint(POST="view_dashboard")
def query(request, token):
    return respond(seed_json(find_task(BY_ID.parse(json_body(request))["id"])))


@endpoint(POST=None)
def delete(request, token):
    may_remove_tasks(token)  # before the body is read
    return respond(remove_task(token, BY_ID.parse(json_body(request))["id"]))
