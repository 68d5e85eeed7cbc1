"""The HTTP API's request bodies, each defined once: the same table validates a body and
describes it in the OpenAPI document (``openapi.py``), so the two can't drift apart.

A body is a JSON object holding only its own fields, each once, with one spelling per route:
``POST /api/tasks`` uses worqr's names, the seed's ``POST /api/create`` the seed's (``topic``,
``content``, ``retry``). ``null`` means "not given". Every error names its field and writes
nothing (the enqueue itself is one atomic script: Redis holds the whole task or nothing).

=========  =======  ==========================================================================
tasks      create
=========  =======  ==========================================================================
queue      topic    queue name (required)
payload    content  text, stored as given (required; send JSON objects as a JSON string)
delay      delay    seconds before it may run (0 to ten years)
retries    retry    retries after a failed attempt (integer 0-1000; default: the queue's)
timeout    timeout  seconds an attempt may run (> 0, at most a week)
backoff    backoff  base seconds between retries (0 to a day; retry n waits backoff * 2**(n-1))
callback   callback http(s) URL the built-in webhook delivery POSTs the task to
tags                 array of up to 20 strings (1-100 characters, no newline), indexed for search
expires              seconds (> 0, at most 30 days): not started by then, the task never starts
throttle, debounce   ``{"key", "seconds"}`` (``docs/task-controls.md``; not both, no debounce+delay)
after      -        task ids (at most 1,000) the task waits for: it is ``blocked`` until each
                    completed
on_parent_failure   "cancel" (default) or "run": what a parent ending otherwise does to it
=========  =======  ==========================================================================

Batches: ``POST /api/batches`` takes ``description``, ``on_success`` and ``on_complete`` (each
``{"queue", "payload"}``); ``POST /api/batches/<id>/tasks`` takes ``queue``, ``payloads`` (1 to
10,000) and the options of a task (``delay``, ``retries``, ``timeout``, ``backoff``).
"""

import math

from ..conf import get_connection
from ..engine import keys
from ..engine.controls import LONGEST
from ..engine.errors import ConfigurationError, InvalidQueueName, InvalidTask
from ..engine.limits import CONCURRENCY_MAX, RATE_STARTS_MAX, RATE_WINDOW_MAX, parse_rate
from ..quoting import QUEUE_NAME_RULE, TASK_ID_RULE, shown
from ..webhooks import MAX_URL_LENGTH, InvalidCallback, allow_list, check_callback
from .controls import not_both, window, window_schema
from .errors import BadRequest
from .paging import name_page

#: Upper bounds: far beyond any sensible use, and small enough for Redis and Lua numbers.
MAX_DELAY = 10 * 365 * 86400  # ten years
MAX_RETRIES = 1000
MAX_TIMEOUT = 7 * 86400  # a week
MAX_BACKOFF = 86400  # a day

QUEUE_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._@+-]*$"
TASK_ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._@+-]*-[0-9a-f]{16}$"
QUEUE_SCHEMA = {"type": "string", "pattern": QUEUE_PATTERN, "minLength": 1, "maxLength": keys.QUEUE_NAME_MAX}
TASK_ID_SCHEMA = {"type": "string", "pattern": TASK_ID_PATTERN, "minLength": 18, "maxLength": keys.QUEUE_NAME_MAX + 17}
BATCH_ID_PATTERN = "^b-[0-9a-f]{16}$"
BATCH_ID_SCHEMA = {"type": "string", "pattern": BATCH_ID_PATTERN}
#: Queues per page of ``GET /api/queues``: when not said (``limit``), and at most.
QUEUES_PAGE, QUEUES_PAGE_MAX = 100, 1000
MAX_PARENTS = 1000
MAX_BATCH_PAYLOADS = 10000
MAX_DESCRIPTION = 1000
#: What the document says of a callback URL: http(s), printable ASCII. Whether its host is
#: allowed is the server's to say (400, field ``callback``).
CALLBACK_PATTERN = "^https?://[!-~]+$"


class Huge:
    """A JSON integer too long for Python to read (over 4,000 digits): out of any range."""

    def __init__(self, negative):
        self.negative = negative


def parse_int(text):
    """``json.loads``' reader of integers: ``Huge`` past 4,000 digits, never Python's error."""
    return int(text) if len(text) <= 4000 else Huge(text.startswith("-"))


def json_type(value):
    if isinstance(value, (int, float, Huge)) and not isinstance(value, bool):
        return "a number"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "null")


def queue_name(value, field="queue"):
    """A valid queue name, else BadRequest naming ``field``."""
    text(field, value)
    try:
        return keys.check_queue_name(value)
    except InvalidQueueName:
        raise BadRequest(f"{field}: {shown(value)} is not a queue name ({QUEUE_NAME_RULE})", field) from None


def queues_page(params):
    """(after, limit) of ``GET /api/queues?after=<name>&limit=<n>`` (``paging.name_page``)."""
    return name_page(params, QUEUES_PAGE, QUEUES_PAGE_MAX)


def task_id(value, field="id"):
    """A well-formed task id, else BadRequest naming ``field``."""
    text(field, value)
    if keys.queue_from_task_id(value) is None:
        raise BadRequest(f"{field}: {shown(value)} is not a task id ({TASK_ID_RULE})", field)
    return value


def text(field, value):
    if not isinstance(value, str):
        raise BadRequest(f"{field}: must be a string, not {json_type(value)}", field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"{field}: is not valid Unicode (a lone surrogate escape)", field) from None
    return value


class Field:
    """One field of a body: its name, the option it sets (``key``), what it accepts."""

    def __init__(self, name, kind, key=None, *, required=False, minimum=None, maximum=None, positive=False, doc=""):
        self.name, self.kind, self.key = name, kind, key or name
        self.required, self.minimum, self.maximum, self.positive, self.doc = required, minimum, maximum, positive, doc

    def parse(self, value):
        name = self.name
        if self.kind == "task_ids":
            if not isinstance(value, list):
                raise BadRequest(f"{name}: must be an array of task ids, not {json_type(value)}", name)
            if len(value) > MAX_PARENTS:
                raise BadRequest(f"{name}: at most {MAX_PARENTS} task ids", name)
            return [task_id(v, name) for v in value]
        if self.kind == "parent_failure":
            if not isinstance(value, str) or value not in ("cancel", "run"):
                given = shown(value) if isinstance(value, str) else json_type(value)
                raise BadRequest(f'{name}: must be "cancel" or "run", not {given}', name)
            return value
        if self.kind == "description":
            text(name, value)
            if len(value) > MAX_DESCRIPTION:
                raise BadRequest(f"{name}: at most {MAX_DESCRIPTION} characters", name)
            return value
        if self.kind == "batch_callback":
            if not isinstance(value, dict) or set(value) != {"queue", "payload"}:
                raise BadRequest(f'{name}: must be an object {{"queue", "payload"}}', name)
            queue_name(value["queue"], f"{name}.queue")
            text(f"{name}.payload", value["payload"])
            self._size(f"{name}.payload", value["payload"])
            return (value["queue"], value["payload"])
        if self.kind == "payloads":
            if not isinstance(value, list) or not value:
                raise BadRequest(f"{name}: must be a non-empty array of strings", name)
            if len(value) > MAX_BATCH_PAYLOADS:
                raise BadRequest(f"{name}: at most {MAX_BATCH_PAYLOADS} payloads per request", name)
            for v in value:
                text(name, v)
                self._size(name, v)
            return value
        if self.kind == "window":
            key = text(f"{name}.key", window(name, value)["key"])
            if not key or len(key) > keys.LOCK_KEY_MAX:
                raise BadRequest(f"{name}.key: must be 1 to {keys.LOCK_KEY_MAX} characters", f"{name}.key")
            return (key, Field(f"{name}.seconds", "number", maximum=LONGEST, positive=True).parse(value["seconds"]))
        if self.kind == "queue":
            return queue_name(value, name)
        if self.kind == "task_id":
            return task_id(value, name)
        if self.kind == "payload":
            text(name, value)
            self._size(name, value)
            return value
        if self.kind == "callback":
            text(name, value)
            try:
                return check_callback(value)
            except InvalidCallback as exc:
                raise BadRequest(f"{name}: {exc}", name) from None
        if self.kind == "tags":
            if not isinstance(value, list):
                raise BadRequest(f"{name}: must be an array of strings, not {json_type(value)}", name)
            for tag in value:
                text(name, tag)
            try:
                return keys.check_tags(value)
            except InvalidTask as exc:
                raise BadRequest(f"{name}: {exc}", name) from None
        return self._number(value)

    @staticmethod
    def _size(name, value):
        size, limit = len(value.encode("utf-8")), get_connection().config.max_payload_bytes
        if size > limit:
            raise BadRequest(f"{name}: {size} bytes is over the limit of {limit} bytes", name)

    def _number(self, value):
        name, integer = self.name, self.kind == "integer"
        if isinstance(value, Huge):
            raise BadRequest(f"{name}: must be {'>= 0' if value.negative else f'at most {self.maximum}'}", name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadRequest(f"{name}: must be {'an integer' if integer else 'a number'}, not {json_type(value)}", name)
        if isinstance(value, float) and not math.isfinite(value):
            raise BadRequest(f"{name}: must be a finite number", name)
        if integer and isinstance(value, float):
            if not value.is_integer():
                raise BadRequest(f"{name}: must be an integer, not {value!r}", name)
            value = int(value)
        if value < 0 or (self.positive and value == 0):
            raise BadRequest(f"{name}: must be {'> 0' if self.positive else '>= 0'}", name)
        if value > self.maximum:
            raise BadRequest(f"{name}: must be at most {self.maximum}", name)
        return value

    def schema(self):
        """The field's JSON Schema, or None when the field can't be used (callbacks off)."""
        doc = self.doc
        payload = {"type": "string", "maxLength": get_connection().config.max_payload_bytes // 4}
        if self.kind == "task_ids":
            out = {"type": "array", "items": dict(TASK_ID_SCHEMA), "maxItems": MAX_PARENTS}
        elif self.kind == "parent_failure":
            out = {"type": "string", "enum": ["cancel", "run"]}
        elif self.kind == "description":
            out = {"type": "string", "maxLength": MAX_DESCRIPTION}
        elif self.kind == "batch_callback":
            out = {
                "type": "object",
                "additionalProperties": False,
                "required": ["queue", "payload"],
                "properties": {"queue": dict(QUEUE_SCHEMA), "payload": payload},
            }
        elif self.kind == "payloads":
            out = {"type": "array", "items": payload, "minItems": 1, "maxItems": MAX_BATCH_PAYLOADS}
        elif self.kind == "window":
            out = window_schema()
        elif self.kind == "queue":
            out = dict(QUEUE_SCHEMA)
        elif self.kind == "task_id":
            out = dict(TASK_ID_SCHEMA)
        elif self.kind == "payload":
            limit = get_connection().config.max_payload_bytes
            out = {"type": "string", "maxLength": limit // 4}
            doc = f"stored as given; at most {limit} bytes in UTF-8 (maxLength: the length that always fits)"
        elif self.kind == "tags":
            item = {"type": "string", "minLength": 1, "maxLength": keys.TAG_MAX, "pattern": "^[^\\n\\r]*$"}
            out = {"type": "array", "items": item, "maxItems": keys.TAGS_MAX}
        elif self.kind == "callback":
            if not allow_list():
                return None
            # The allow-list is the operator's (internal names, ports, networks): it is checked
            # on the server and never published in this unauthenticated document.
            out = {"type": "string", "maxLength": MAX_URL_LENGTH, "pattern": CALLBACK_PATTERN}
        else:
            out = {"type": self.kind, "minimum": 0, "maximum": self.maximum}
            if self.positive:
                out = {"type": self.kind, "exclusiveMinimum": 0, "maximum": self.maximum}
        if not self.required:
            out["type"] = [out["type"], "null"]
        if doc:
            out["description"] = doc
        return out


class Body:
    """A JSON object body made of ``fields``; ``spellings`` maps other routes' names of its
    fields to its own, for a helpful error."""

    def __init__(self, *fields, spellings=None, exclusive=()):
        self.fields = {f.name: f for f in fields}
        self.spellings = spellings or {}
        #: Pairs of fields that can't both be given (not null): the first is named in the error.
        self.exclusive = tuple(exclusive)

    def parse(self, data):
        """``{key: value}`` of the fields given (not null), or raise BadRequest."""
        for name in data:
            if name not in self.fields:
                hint = f' (here it is "{self.spellings[name]}")' if name in self.spellings else ""
                raise BadRequest(f"unknown field {shown(name)}{hint}; the fields are {', '.join(self.fields)}", name)
        out = {}
        for name, field in self.fields.items():
            value = data.get(name)
            if value is None:
                if field.required:
                    raise BadRequest(f"{name}: is required", name)
                continue
            out[field.key] = field.parse(value)
        for a, b in self.exclusive:
            if a in out and b in out:
                raise BadRequest(f"{a}: can't be given with {b}", a)
        return out

    def schema(self):
        properties = {name: s for name, f in self.fields.items() if (s := f.schema()) is not None}
        required = [name for name, f in self.fields.items() if f.required]
        out = {"type": "object", "additionalProperties": False, "required": required, "properties": properties}
        if self.exclusive:
            out["allOf"] = [not_both(a, b) for a, b in self.exclusive]
        return out


def _create(queue, payload, retries, others, extra=(), workflow=False, exclusive=()):
    extra = tuple(extra)
    if workflow:
        extra += (
            Field("after", "task_ids", doc="task ids the task waits for (blocked until each completed)"),
            Field(
                "on_parent_failure",
                "parent_failure",
                doc="what a parent failing, cancelled or deleted does: cancel the task (default) or run it",
            ),
        )
    return Body(
        Field(queue, "queue", "queue", required=True, doc="the queue's name"),
        Field(payload, "payload", "payload", required=True),
        Field("delay", "number", maximum=MAX_DELAY, doc="seconds before it may run"),
        Field(retries, "integer", "retries", maximum=MAX_RETRIES, doc="retries after a failed attempt"),
        Field("timeout", "number", maximum=MAX_TIMEOUT, positive=True, doc="seconds an attempt may run"),
        Field(
            "backoff",
            "number",
            maximum=MAX_BACKOFF,
            doc="base seconds between retries: retry n waits backoff * 2**(n-1)",
        ),
        Field(
            "callback",
            "callback",
            doc="http(s) URL the task is POSTed to; its host must be one the server's allow-list "
            "(WORQR['CALLBACK_ALLOWED_HOSTS'], not published) allows, else 400 naming the field",
        ),
        *extra,
        spellings=others,
        exclusive=exclusive,
    )


#: POST /api/tasks
CREATE_TASK = _create(
    "queue",
    "payload",
    "retries",
    {"topic": "queue", "content": "payload", "retry": "retries"},
    [
        Field("tags", "tags", doc="tags, indexed for search (e.g. customer:42)"),
        Field(
            "expires",
            "number",
            maximum=LONGEST,
            positive=True,
            doc="seconds: a task not started by then never starts (it ends expired)",
        ),
        Field("throttle", "window", doc="one task per key per window of seconds; the others get its id"),
        Field(
            "debounce",
            "window",
            doc="one task per key, run seconds after the last enqueue, with the last payload (no delay with it)",
        ),
    ],
    workflow=True,
    exclusive=[("debounce", "throttle"), ("debounce", "delay")],
)
#: POST /api/create, in the seed's names
SEED_CREATE = _create("topic", "content", "retry", {"queue": "topic", "payload": "content", "retries": "retry"})
#: POST /api/batches
CREATE_BATCH = Body(
    Field("description", "description", doc="what the batch is"),
    Field("on_success", "batch_callback", doc="a task enqueued once if every task of the batch completed"),
    Field("on_complete", "batch_callback", doc="a task enqueued once when every task of the batch has ended"),
)
#: POST /api/batches/<id>/tasks
BATCH_TASKS = Body(
    Field("queue", "queue", required=True, doc="the queue the tasks go to"),
    Field("payloads", "payloads", required=True, doc="the tasks' payloads, one task each"),
    Field("delay", "number", maximum=MAX_DELAY, doc="seconds before they may run"),
    Field("retries", "integer", maximum=MAX_RETRIES, doc="retries after a failed attempt"),
    Field("timeout", "number", maximum=MAX_TIMEOUT, positive=True, doc="seconds an attempt may run"),
    Field("backoff", "number", maximum=MAX_BACKOFF, doc="base seconds between retries"),
)
#: POST /api/query and /api/delete
BY_ID = Body(Field("id", "task_id", required=True, doc="a task id"))


def create_options(body, spec=CREATE_TASK):
    """``(queue, payload, enqueue kwargs)`` from a create body, or raise BadRequest."""
    options = spec.parse(body)
    return options.pop("queue"), options.pop("payload"), options


# -- PUT /api/queues/<name>/limits ------------------------------------------------------------

#: Limits the body may set: absent leaves one as it is, ``null`` means "no limit".
LIMIT_NAMES = ("concurrency", "rate", "partition_concurrency", "partition_rate")
#: Fields of GET's answer a PUT may send back unchanged: read, never written.
LIMITS_READ_ONLY = (
    "name",
    "handler",
    "overrides",
    "active",
    "kept",
    "starts_in_window",
    "held_back",
    "runnable",
    "partitions",
    "held_until",
    "held_partitions",
)


def _limit_concurrency(name, value):
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= CONCURRENCY_MAX:
        raise BadRequest(f"{name}: must be an integer from 1 to {CONCURRENCY_MAX}, or null", name)
    return value


def _limit_rate(name, value):
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], float) and value[0].is_integer():
        value = [int(value[0]), value[1]]
    if isinstance(value, list) and any(isinstance(v, Huge) for v in value):
        raise BadRequest(f"{name}: number out of range", name)
    if not isinstance(value, (str, list)):
        raise BadRequest(f'{name}: must be [starts, seconds], a string like "100/m", or null', name)
    try:
        return parse_rate("", name, value)
    except ConfigurationError as exc:
        raise BadRequest(f"{name}: {str(exc).split(': ', 1)[1]}", name) from None


def limits_body(data):
    """``(reset, {limit: value or None})`` from a PUT body, or raise BadRequest naming the field."""
    if not isinstance(data, dict):
        raise BadRequest(f"the body must be a JSON object, not {json_type(data)}")
    known = (*LIMIT_NAMES, "reset", *LIMITS_READ_ONLY)
    for name in data:
        if name not in known:
            raise BadRequest(f"unknown field {shown(name)}; the fields are {', '.join(LIMIT_NAMES)}, reset", name)
    reset = data.get("reset", False)
    if reset is None:
        reset = False
    if not isinstance(reset, bool):
        raise BadRequest(f"reset: must be true or false, not {json_type(reset)}", "reset")
    out = {}
    for name in LIMIT_NAMES:
        if name not in data:
            continue
        value = data[name]
        if value is None:
            out[name] = None
        elif name.endswith("concurrency"):
            out[name] = _limit_concurrency(name, value)
        else:
            out[name] = _limit_rate(name, value)
    return reset, out


def limits_schema():
    """The JSON Schema of a PUT body (what ``limits_body`` accepts)."""
    concurrency = {"type": ["integer", "null"], "minimum": 1, "maximum": CONCURRENCY_MAX}
    rate = {
        "oneOf": [
            {
                "type": "array",
                "prefixItems": [
                    {"type": "integer", "minimum": 1, "maximum": RATE_STARTS_MAX},
                    {"type": "number", "minimum": 0.001, "maximum": RATE_WINDOW_MAX},
                ],
                "items": False,
                "minItems": 2,
                "maxItems": 2,
            },
            {"type": "string", "pattern": "^[1-9][0-9]{0,5}/[smh]$"},
            {"type": "null"},
        ],
        "description": '[starts, seconds] or "<starts>/s", "/m", "/h"; null: no limit',
    }
    properties = {
        "concurrency": dict(concurrency, description="active tasks at once, all workers together; null: no limit"),
        "rate": rate,
        "partition_concurrency": dict(concurrency, description="per partition key"),
        "partition_rate": dict(rate, description="per partition key"),
        "reset": {
            "type": ["boolean", "null"],
            "description": "drop every override first (back to the handler's values), then set those given",
        },
    }
    properties.update({name: {"description": "read-only: ignored"} for name in LIMITS_READ_ONLY})
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [],
        "properties": properties,
        "description": "Fields absent stay as they are; GET's answer may be sent back as it is.",
    }
