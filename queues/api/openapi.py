"""The OpenAPI 3.1 description served at ``/api/openapi.json``.

Kept true by ``tests/test_api_openapi.py``: every route in ``urls.py`` is described here with
its methods, and every status listed for an operation is produced by a request in that test.
"""

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from .errors import MethodNotAllowed
from .http import error_response
from .validation import MAX_BACKOFF, MAX_DELAY, MAX_RETRIES, MAX_TIMEOUT

_STATUS = {
    200: "OK", 201: "Created", 400: "Bad input: the message (and `field`) say what",
    401: "No valid bearer token", 403: "The token lacks the permission", 404: "Not found",
    409: "The task changed state meanwhile; read it again", 413: "Body larger than any valid request",
    415: "The body is not JSON", 503: "Redis is unavailable; try again",
}


def _ref(name):
    return {"$ref": f"#/components/schemas/{name}"}


def _op(summary, permission, ok, codes, schema=None, body=None, params=()):
    responses = {}
    for code in codes:
        content = schema if code in (200, 201) else _ref("Error")
        responses[str(code)] = {"description": _STATUS[code]}
        if content is not None:
            responses[str(code)]["content"] = {"application/json": {"schema": content}}
    op = {"summary": summary, "responses": responses, "security": [{"bearer": []}]}
    if permission:
        op["description"] = f"Needs the permission `queues.{permission}`."
    if body:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if params:
        op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params]
    return op


_READ = (401, 403, 503)
_WRITE = (400, 401, 403, 413, 415, 503)

_PATHS = {
    "/api/tasks": {
        "post": _op("Create a task", "enqueue_task", 201, (201, *_WRITE), _ref("Created"), _ref("CreateTask")),
    },
    "/api/tasks/{id}": {
        "get": _op("Read a task", "view_dashboard", 200, (200, 404, *_READ), _ref("Task"), params=("id",)),
        "delete": _op(
            "Cancel a pending, delayed, waiting or running task (`queues.cancel_task`), or delete a "
            "failed or completed one (`queues.delete_task`)", None, 200, (200, 404, 409, *_READ),
            _ref("Removed"), params=("id",)),
    },
    "/api/queues": {
        "get": _op("List queues with counts, paused state and workers", "view_dashboard", 200, (200, *_READ),
                   {"type": "object", "properties": {"queues": {"type": "array", "items": _ref("Queue")}}}),
    },
    "/api/queues/{name}": {
        "get": _op("Read a queue", "view_dashboard", 200, (200, 400, 404, *_READ), _ref("Queue"), params=("name",)),
    },
    "/api/queues/{name}/pause": {
        "post": _op("Pause a queue: no task of it starts until resumed", "pause_queue", 200,
                    (200, 400, 404, *_READ), _ref("Paused"), params=("name",)),
    },
    "/api/queues/{name}/resume": {
        "post": _op("Resume a paused queue", "pause_queue", 200, (200, 400, 404, *_READ), _ref("Paused"),
                    params=("name",)),
    },
    "/api/schedules": {
        "get": _op("List the schedules (periodic tasks) with their next and last runs", "view_dashboard", 200,
                   (200, *_READ),
                   {"type": "object", "properties": {"schedules": {"type": "array", "items": _ref("Schedule")}}}),
    },
    "/api/schedules/{name}": {
        "get": _op("Read a schedule", "view_dashboard", 200, (200, 400, 404, *_READ), _ref("Schedule"),
                   params=("name",)),
    },
    "/api/schedules/{name}/pause": {
        "post": _op("Pause a schedule (durable: its ticks pass without runs until resumed)", "manage_schedules",
                    200, (200, 400, 404, *_READ), _ref("SchedulePaused"), params=("name",)),
    },
    "/api/schedules/{name}/resume": {
        "post": _op("Resume a schedule from its next tick (no catch-up)", "manage_schedules", 200,
                    (200, 400, 404, *_READ), _ref("SchedulePaused"), params=("name",)),
    },
    "/api/schedules/{name}/trigger": {
        "post": _op("Enqueue one run of a schedule now (its next tick stays); `Location` is the task",
                    "manage_schedules", 201, (201, 400, 404, *_READ), _ref("Triggered"), params=("name",)),
    },
    "/api/create": {
        "post": _op("The seed's create (aliases of POST /api/tasks; answers 200)", "enqueue_task", 200,
                    (200, *_WRITE), _ref("Created"), _ref("CreateTask")),
    },
    "/api/query": {
        "post": _op("The seed's query", "view_dashboard", 200, (200, 400, 404, 415, *_READ),
                    _ref("SeedTask"), _ref("ById")),
    },
    "/api/delete": {
        "post": _op("The seed's delete (same rules as DELETE /api/tasks/{id})", None, 200,
                    (200, 400, 404, 409, 415, *_READ), _ref("Removed"), _ref("ById")),
    },
    "/api/openapi.json": {
        "get": {"summary": "This description", "security": [],
                "responses": {"200": {"description": "OK", "content": {"application/json": {}}}}},
    },
}

_NULLABLE_STR = {"type": ["string", "null"]}
_TIME = {"type": ["string", "null"], "format": "date-time"}

_SCHEMAS = {
    "Error": {"type": "object", "required": ["error"],
              "properties": {"error": {"type": "string"}, "field": {"type": "string"}}},
    "CreateTask": {
        "type": "object", "additionalProperties": False,
        "description": "`topic`, `content` and `retry` are the seed's names for `queue`, `payload` and "
                       "`retries`; give one spelling of each. Required: queue and payload.",
        "properties": {
            "queue": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._@+-]*$", "maxLength": 200},
            "topic": {"type": "string"},
            "payload": {"type": "string", "description": "Stored as given; at most MAX_PAYLOAD_BYTES bytes"},
            "content": {"type": "string"},
            "delay": {"type": "number", "minimum": 0, "maximum": MAX_DELAY, "description": "seconds"},
            "retries": {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES},
            "retry": {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT},
            "backoff": {"type": "number", "minimum": 0, "maximum": MAX_BACKOFF},
            "callback": {"type": "string", "format": "uri", "maxLength": 2048,
                         "description": "http(s) URL whose host is in WORQR['CALLBACK_ALLOWED_HOSTS']"},
        },
    },
    "Created": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
    "ById": {"type": "object", "required": ["id"], "additionalProperties": False,
             "properties": {"id": {"type": "string"}}},
    "Task": {"type": "object", "properties": {
        "id": {"type": "string"}, "queue": {"type": "string"}, "payload": {"type": "string"},
        "state": {"enum": ["pending", "delayed", "waiting", "active", "failed", "completed"]},
        "attempts": {"type": "integer"}, "retries": {"type": ["integer", "null"]},
        "timeout": {"type": ["number", "null"]}, "backoff": {"type": ["number", "null"]},
        "callback": _NULLABLE_STR, "worker": _NULLABLE_STR, "error": _NULLABLE_STR,
        "created_at": _TIME, "due_at": _TIME, "started_at": _TIME, "failed_at": _TIME, "finished_at": _TIME,
        "cancel_requested": {"type": "boolean"},
    }},
    "SeedTask": {"type": "object", "properties": {
        "id": {"type": "string"}, "topic": {"type": "string"}, "content": {"type": "string"},
        "callback": _NULLABLE_STR, "execute_time": {"type": "integer"}, "creat_time": {"type": "integer"},
        "max_retry": {"type": ["integer", "null"]}, "has_retry": {"type": "integer"},
        "state": {"type": "string"}, "error": _NULLABLE_STR,
    }},
    "Removed": {"type": "object", "properties": {
        "id": {"type": "string"}, "queue": {"type": "string"}, "result": {"enum": ["cancelled", "deleted"]}}},
    "Paused": {"type": "object", "properties": {"name": {"type": "string"}, "paused": {"type": "boolean"}}},
    "Schedule": {"type": "object", "properties": {
        "name": {"type": "string"}, "queue": {"type": "string"}, "cron": _NULLABLE_STR,
        "every": {"type": ["number", "null"], "description": "seconds"}, "timezone": {"type": "string"},
        "payload": {"type": "string"}, "enabled": {"type": "boolean"}, "paused": {"type": "boolean"},
        "missed": {"enum": ["skip", "once"]}, "overlap": {"type": "boolean"},
        "options": {"type": "object", "description": "enqueue options: retries, timeout, backoff, lock, callback"},
        "next_run": _TIME, "last_run": _TIME, "last_tick": _TIME, "paused_at": _TIME,
        "last_task_id": _NULLABLE_STR, "last_kind": {"enum": ["tick", "catchup", "trigger", None]},
        "runs": {"type": "integer"}, "catchups": {"type": "integer"}, "triggered": {"type": "integer"},
        "skipped": {"type": "integer"},
    }},
    "SchedulePaused": {"type": "object", "properties": {"name": {"type": "string"}, "paused": {"type": "boolean"}}},
    "Triggered": {"type": "object", "required": ["name", "id"],
                  "properties": {"name": {"type": "string"}, "id": {"type": "string"}}},
    "Queue": {"type": "object", "properties": {
        "name": {"type": "string"}, "paused": {"type": "boolean"},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"},
                   "description": "pending, delayed, active, failed (now) and lifetime counters"},
        "workers": {"type": "array", "items": {"type": "object"}},
    }},
}


def describe():
    return {
        "openapi": "3.1.0",
        "info": {"title": "worqr HTTP API", "version": "1",
                 "description": "Tasks, queues and schedules of worqr over HTTP. Send `Authorization: Bearer <token>`; "
                                "bodies are JSON objects. Unknown methods on a path answer 405."},
        "paths": _PATHS,
        "components": {"schemas": _SCHEMAS,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


@csrf_exempt
def openapi_json(request):
    """Public: the description holds no data."""
    if request.method not in ("GET", "HEAD"):
        return error_response(MethodNotAllowed(request.method, ["GET"]))
    return JsonResponse(describe())
