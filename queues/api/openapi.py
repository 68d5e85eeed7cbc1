"""The OpenAPI 3.1 description served at ``/api/openapi.json``.

Request bodies come from ``bodies.py``, the table that also validates them, so what the
document calls valid is accepted, but for one thing it cannot say: whether a callback's host is
one the server's allow-list allows (the list is the operator's internal names, ports and
networks, and this document is served without a token: it says only that the field exists).
Kept true by ``tests/test_api_openapi.py``: every route in ``urls.py`` is described here with
its methods, every status listed for an operation is produced by a request there, and
schemathesis sends requests generated from this document (none may be refused with 400 but for
a callback host, and none may fail with a 5xx; every answer must match its documented status
and schema) and requests that break it (none may fail with a 5xx).
"""

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from . import schedule_schema
from .bodies import (
    BATCH_ID_SCHEMA,
    BATCH_TASKS,
    BY_ID,
    CREATE_BATCH,
    CREATE_TASK,
    QUEUE_SCHEMA,
    QUEUES_PAGE_MAX,
    SEED_CREATE,
    TASK_ID_SCHEMA,
    limits_schema,
)
from .errors import MethodNotAllowed
from .http import error_response

_STATUS = {
    200: "OK",
    201: "Created",
    400: "Bad input: the message (and `field`) say what",
    401: "No valid bearer token",
    403: "The token lacks the permission",
    404: "Not found",
    409: "The task changed state meanwhile (read it again), or a new queue beyond MAX_QUEUES",
    413: "Body larger than any valid request",
    415: "The body is not JSON",
    503: "Redis is unavailable; try again",
}
_READ = (401, 403, 503)
_WRITE = (400, 401, 403, 413, 415, 503)
_PARAMS = {"id": TASK_ID_SCHEMA, "name": QUEUE_SCHEMA, "batch_id": BATCH_ID_SCHEMA}


def _object(properties, required=None):
    return {"type": "object", "required": list(properties) if required is None else required, "properties": properties}


def _ref(name):
    return {"$ref": f"#/components/schemas/{name}"}


def _op(summary, permission, codes, schema=None, body=None, params=()):
    responses = {}
    for code in codes:
        content = schema if code in (200, 201) else _ref("Error")
        responses[str(code)] = {"description": _STATUS[code], "content": {"application/json": {"schema": content}}}
    op = {"summary": summary, "responses": responses, "security": [{"bearer": []}]}
    if permission:
        names = " and ".join(f"`queues.{p}`" for p in permission.split("+"))
        op["description"] = f"Needs the permission{'s' if '+' in permission else ''} {names}."
    if body:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(body)}}}
    if params:
        op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": _PARAMS[p]} for p in params]
    return op


_PATHS = {
    "/api/tasks": {
        "post": _op(
            "Create a task (404: a task of `after` is unknown; 409: a new queue beyond MAX_QUEUES)",
            "enqueue_task",
            (201, 404, 409, *_WRITE),
            _ref("Created"),
            "CreateTask",
        ),
    },
    "/api/batches": {
        "post": _op("Open a batch", "enqueue_task", (201, *_WRITE), _ref("Created"), "CreateBatch"),
    },
    "/api/batches/{batch_id}": {
        "get": _op("Read a batch", "view_dashboard", (200, 400, 404, *_READ), _ref("Batch"), params=("batch_id",)),
        "delete": _op(
            "Cancel a batch: it is closed and its unfinished tasks are cancelled",
            "cancel_task+purge_queue",
            (200, 400, 404, *_READ),
            _object({"id": {"type": "string"}, "cancelled": {"type": "integer"}}),
            params=("batch_id",),
        ),
    },
    "/api/batches/{batch_id}/tasks": {
        "post": _op(
            "Add tasks to an open batch (409 once it is closed, or for a new queue beyond MAX_QUEUES)",
            "enqueue_task",
            (201, 404, 409, *_WRITE),
            _object({"ids": {"type": "array", "items": {"type": "string"}}}),
            "BatchTasks",
            params=("batch_id",),
        ),
    },
    "/api/batches/{batch_id}/close": {
        "post": _op(
            "Close a batch: no more tasks; its callbacks are enqueued once every task has ended. "
            "Answers the batch to a token with `queues.view_dashboard`, else only `{id, closed}`",
            "enqueue_task",
            (200, 400, 404, *_READ),
            {"anyOf": [_ref("Batch"), _object({"id": {"type": "string"}, "closed": {"type": "boolean"}})]},
            params=("batch_id",),
        ),
    },
    "/api/tasks/{id}": {
        "get": _op("Read a task", "view_dashboard", (200, 404, *_READ), _ref("Task"), params=("id",)),
        "delete": _op(
            "Cancel a pending, delayed, waiting or running task (`queues.cancel_task`), or delete a "
            "failed or completed one (`queues.delete_task`)",
            None,
            (200, 404, 409, *_READ),
            _ref("Removed"),
            params=("id",),
        ),
    },
    "/api/tasks/{id}/run-now": {
        "post": _op(
            "Run a delayed task now: it goes before every pending task (409 once it is no longer delayed)",
            "retry_task",
            (200, 404, 409, *_READ),
            _ref("RunNow"),
            params=("id",),
        ),
    },
    "/api/queues": {
        "get": {
            **_op(
                "List queues with counts, paused state and workers, by name, a page at a time (`next`: "
                "the `after` of the next page, null on the last)",
                "view_dashboard",
                (200, 400, *_READ),
                {
                    "type": "object",
                    "required": ["queues", "next", "total"],
                    "properties": {
                        "queues": {"type": "array", "items": _ref("Queue")},
                        "next": {"type": ["string", "null"]},
                        "total": {"type": "integer", "minimum": 0},
                    },
                },
            ),
            "parameters": [
                {"name": "after", "in": "query", "required": False, "schema": QUEUE_SCHEMA},
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": QUEUES_PAGE_MAX},
                },
            ],
        },
    },
    "/api/queues/{name}": {
        "get": _op("Read a queue", "view_dashboard", (200, 400, 404, *_READ), _ref("Queue"), params=("name",)),
    },
    "/api/queues/{name}/pause": {
        "post": _op(
            "Pause a queue: no task of it starts until resumed",
            "pause_queue",
            (200, 400, 404, *_READ),
            _ref("Paused"),
            params=("name",),
        ),
    },
    "/api/queues/{name}/resume": {
        "post": _op("Resume a paused queue", "pause_queue", (200, 400, 404, *_READ), _ref("Paused"), params=("name",)),
    },
    "/api/queues/{name}/limits": {
        "get": _op(
            "Read a queue's limits (concurrency, rate, per partition) and their current use",
            "view_dashboard",
            (200, 400, 404, *_READ),
            _ref("Limits"),
            params=("name",),
        ),
        "put": _op(
            "Override a queue's limits (durable, for every worker at once; null: no limit), or reset "
            "them to the handler's values; answers the limits now to a token with "
            "`queues.view_dashboard`, else only `{name, updated}`",
            "manage_limits",
            (200, 404, *_WRITE),
            {"anyOf": [_ref("Limits"), _object({"name": {"type": "string"}, "updated": {"type": "boolean"}})]},
            "SetLimits",
            params=("name",),
        ),
    },
    "/api/schedules": {
        "get": {
            **_op(
                schedule_schema.SCHEDULE_LIST_SUMMARY,
                "view_dashboard",
                (200, 400, *_READ),
                schedule_schema.schedule_list_schema(_ref("Schedule")),
            ),
            "parameters": schedule_schema.schedule_list_parameters(),
        },
    },
    "/api/schedules/{name}": {
        "get": _op("Read a schedule", "view_dashboard", (200, 400, 404, *_READ), _ref("Schedule"), params=("name",)),
        "post": _op(
            "Create a schedule at run time (the keys of a WORQR['SCHEDULES'] entry); every worker fires it "
            "from its next tick; 409: the name is taken. Answers the schedule to a token with "
            "`queues.view_dashboard`, else only `{name, created}`",
            "change_schedule",
            (201, 409, *_WRITE),
            {"anyOf": [_ref("Schedule"), _object({"name": {"type": "string"}, "created": {"type": "boolean"}})]},
            "ScheduleCreate",
            params=("name",),
        ),
        "patch": _op(
            "Change a schedule made at run time (the keys given; null removes an option); its next run "
            "follows the new settings; 409: a schedule of the settings. Answers the schedule to a token "
            "with `queues.view_dashboard`, else only `{name, updated}`",
            "change_schedule",
            (200, 404, 409, *_WRITE),
            {"anyOf": [_ref("Schedule"), _object({"name": {"type": "string"}, "updated": {"type": "boolean"}})]},
            "ScheduleChange",
            params=("name",),
        ),
        "delete": _op(
            "Delete a schedule made at run time: no run after this; 409: a schedule of the settings",
            "change_schedule",
            (200, 400, 404, 409, *_READ),
            _object({"name": {"type": "string"}, "deleted": {"type": "boolean"}}),
            params=("name",),
        ),
    },
    "/api/schedules/{name}/pause": {
        "post": _op(
            "Pause a schedule (durable: its ticks pass without runs until resumed)",
            "manage_schedules",
            (200, 400, 404, *_READ),
            _ref("SchedulePaused"),
            params=("name",),
        ),
    },
    "/api/schedules/{name}/resume": {
        "post": _op(
            "Resume a schedule from its next tick (no catch-up)",
            "manage_schedules",
            (200, 400, 404, *_READ),
            _ref("SchedulePaused"),
            params=("name",),
        ),
    },
    "/api/schedules/{name}/trigger": {
        "post": _op(
            "Enqueue one run of a schedule now (its next tick stays); `Location` is the task",
            "manage_schedules",
            (201, 400, 404, *_READ),
            _ref("Triggered"),
            params=("name",),
        ),
    },
    "/api/create": {
        "post": _op(
            "The seed's create, in the seed's field names (answers 200)",
            "enqueue_task",
            (200, 409, *_WRITE),
            _ref("Created"),
            "SeedCreate",
        ),
    },
    "/api/query": {
        "post": _op("The seed's query", "view_dashboard", (200, 404, *_WRITE), _ref("SeedTask"), "ById"),
    },
    "/api/delete": {
        "post": _op(
            "The seed's delete (same rules as DELETE /api/tasks/{id})",
            None,
            (200, 404, 409, *_WRITE),
            _ref("Removed"),
            "ById",
        ),
    },
    "/api/openapi.json": {
        "get": {
            "summary": "This description",
            "security": [],
            "responses": {"200": {"description": "OK", "content": {"application/json": {}}}},
        },
    },
}

_STR, _INT = {"type": "string"}, {"type": "integer"}
_NULLABLE_STR = {"type": ["string", "null"]}
_TIME = {"type": ["string", "null"], "format": "date-time"}


_RESPONSES = {
    "Error": _object(
        {
            "error": _STR,
            "field": _STR,
            "outcome": {"enum": ["completed", "failed", "cancelled", "deleted"]},
            "reason": _STR,
            "parents": {"type": "array", "items": _STR},
            "added": {"type": "array", "items": _STR},
            "unknown": {"type": "array", "items": _STR},
            "not_added": {"type": "array", "items": _STR},
        },
        required=["error"],
    ),
    "Created": _object({"id": _STR}),
    "Task": _object(
        {
            "id": _STR,
            "queue": _STR,
            "payload": _STR,
            "state": {
                "enum": ["pending", "delayed", "waiting", "blocked", "active", "failed", "completed", "cancelled"]
            },
            "attempts": _INT,
            "retries": {"type": ["integer", "null"]},
            "timeout": {"type": ["number", "null"]},
            "backoff": {"type": ["number", "null"]},
            "callback": _NULLABLE_STR,
            "worker": _NULLABLE_STR,
            "error": _NULLABLE_STR,
            "created_at": _TIME,
            "due_at": _TIME,
            "started_at": _TIME,
            "failed_at": _TIME,
            "finished_at": _TIME,
            "cancel_requested": {"type": "boolean"},
            "tags": {"type": "array", "items": _STR},
            "progress": {
                "type": ["object", "null"],
                "properties": {"fraction": {"type": "number"}, "message": _STR},
                "required": ["fraction", "message"],
                "additionalProperties": False,
            },
            "checkpoint": {
                "description": "a generator handler's last saved checkpoint (any JSON value; null before the first)"
            },
            "checkpoint_saved_at": _TIME,
            "runs": {"type": "integer", "description": "how many runs of a generator handler began (0 for others)"},
            "log": {"type": "array", "items": _STR, "description": "the task's last log lines, oldest first"},
        }
    ),
    "SeedTask": _object(
        {
            "id": _STR,
            "topic": _STR,
            "content": _STR,
            "callback": _NULLABLE_STR,
            "execute_time": {"type": ["integer", "null"]},
            "creat_time": {"type": ["integer", "null"]},
            "max_retry": {"type": ["integer", "null"]},
            "has_retry": _INT,
            "state": _STR,
            "error": _NULLABLE_STR,
        }
    ),
    "Batch": _object(
        {
            "id": _STR,
            "description": _STR,
            "state": {"enum": ["open", "running", "succeeded", "finished_with_failures"]},
            "total": _INT,
            "pending": _INT,
            "active": _INT,
            "completed": _INT,
            "failed": _INT,
            "cancelled": _INT,
            "created_at": _TIME,
            "finished_at": _TIME,
            "closed": {"type": "boolean"},
            "cancel_requested": {"type": "boolean"},
            "callbacks_enqueued": {"type": "boolean"},
            "on_success": {"type": ["array", "null"], "description": "[queue, payload]"},
            "on_complete": {"type": ["array", "null"], "description": "[queue, payload]"},
            "queues": {"type": "array", "items": _STR},
        }
    ),
    "Removed": _object({"id": _STR, "queue": _STR, "result": {"enum": ["cancelled", "deleted"]}}),
    "Paused": _object({"name": _STR, "paused": {"type": "boolean"}}),
    "RunNow": _object({"id": _STR, "queue": _STR, "state": {"enum": ["pending"]}}),
    "Queue": _object(
        {
            "name": _STR,
            "paused": {"type": "boolean"},
            "counts": {
                "type": "object",
                "additionalProperties": _INT,
                "description": "pending, delayed, active, failed (now) and lifetime counters",
            },
            "workers": {"type": "array", "items": {"type": "object"}},
        }
    ),
    "Schedule": _object(
        {
            "name": _STR,
            "queue": _STR,
            "cron": _NULLABLE_STR,
            "every": {"type": ["number", "null"], "description": "seconds"},
            "timezone": _STR,
            "payload": _STR,
            "enabled": {"type": "boolean"},
            "paused": {"type": "boolean"},
            "missed": {"enum": ["skip", "once"]},
            "overlap": {"type": "boolean"},
            "options": {"type": "object", "description": "enqueue options: retries, timeout, backoff, lock, callback"},
            "next_run": _TIME,
            "last_run": _TIME,
            "last_tick": _TIME,
            "paused_at": _TIME,
            "last_task_id": _NULLABLE_STR,
            "last_kind": {"enum": ["tick", "catchup", "trigger", None]},
            "runs": _INT,
            "catchups": _INT,
            "triggered": _INT,
            "skipped": _INT,
        },
        required=["name", "queue", "paused", "next_run"],
    ),
    "SchedulePaused": _object({"name": _STR, "paused": {"type": "boolean"}}),
    "Limits": _object(
        {
            "name": _STR,
            "concurrency": {"type": ["integer", "null"]},
            "rate": {"type": ["array", "null"], "description": "[starts, seconds]"},
            "partition_concurrency": {"type": ["integer", "null"]},
            "partition_rate": {"type": ["array", "null"], "description": "[starts, seconds]"},
            "handler": {"type": "object", "description": "the handler's values, as workers registered them"},
            "overrides": {"type": "object", "description": "the overrides set (null: no limit)"},
            "active": {"type": "integer", "description": "slots in use: active tasks, and kept ones"},
            "kept": {"type": "integer", "description": "handlers still running after their outcome was recorded"},
            "starts_in_window": {"type": ["integer", "null"]},
            "held_back": _INT,
            "runnable": _INT,
            "partitions": {"type": "object"},
            "held_until": {
                "type": ["string", "null"],
                "format": "date-time",
                "description": "until when a handler's RateLimited holds the queue: nothing starts",
            },
            "held_partitions": {
                "type": "object",
                "additionalProperties": {"type": "string", "format": "date-time"},
                "description": "partitions a handler's RateLimited holds, each until when (the soonest 20)",
            },
        }
    ),
    "Triggered": _object({"name": _STR, "id": _STR}),
}


def describe():
    """The document, for the settings in force (payload limit; callbacks on or off)."""
    bodies = {
        "CreateTask": dict(CREATE_TASK.schema(), description="Fields of a new task. Required: queue and payload."),
        "SeedCreate": dict(
            SEED_CREATE.schema(),
            description="POST /api/tasks in the seed's names: topic, content, retry (for queue, payload, retries).",
        ),
        "ById": BY_ID.schema(),
        "CreateBatch": dict(CREATE_BATCH.schema(), description="A new batch: its description and callbacks."),
        "BatchTasks": dict(BATCH_TASKS.schema(), description="Tasks added to a batch: a queue and their payloads."),
        "SetLimits": limits_schema(),
        "ScheduleCreate": schedule_schema.schedule_settings_schema(True),
        "ScheduleChange": schedule_schema.schedule_settings_schema(False),
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "worqr HTTP API",
            "version": "1",
            "description": "Tasks, queues and schedules of worqr over HTTP. Send `Authorization: Bearer <token>`; "
            "bodies are JSON objects. Unknown methods on a path answer 405.",
        },
        "paths": _PATHS,
        "components": {
            "schemas": {**bodies, **_RESPONSES},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


@csrf_exempt
def openapi_json(request):
    """Public: the description holds no data."""
    if request.method not in ("GET", "HEAD"):
        return error_response(MethodNotAllowed(request.method, ["GET"]))
    return JsonResponse(describe())
