"""The create body: every field checked here, each error naming its field, before anything is
written (the enqueue itself is one atomic script, so Redis then holds the whole task or nothing).

Fields, with the seed's names accepted as aliases (giving both spellings is an error):

=========  =======  ==========================================================================
queue      topic    queue name (required)
payload    content  text, stored as given (required; send JSON objects as a JSON string)
delay               seconds before it may run (>= 0)
retries    retry    retries after a failed attempt (integer >= 0; default: the queue's)
timeout             seconds an attempt may run (> 0)
backoff             base seconds between retries (>= 0; retry n waits backoff * 2**(n-1))
callback            http(s) URL the built-in webhook delivery POSTs the task to
=========  =======  ==========================================================================
"""

import math

from ..conf import get_connection
from ..engine import keys
from ..engine.errors import InvalidQueueName
from ..webhooks import InvalidCallback, check_callback
from .errors import BadRequest

#: name accepted in the body -> the field it sets
ALIASES = {
    "queue": "queue", "topic": "queue", "payload": "payload", "content": "payload",
    "delay": "delay", "retries": "retries", "retry": "retries", "timeout": "timeout",
    "backoff": "backoff", "callback": "callback",
}
#: Upper bounds: far beyond any sensible use, and small enough for Redis and Lua numbers.
MAX_DELAY = 10 * 365 * 86400  # ten years
MAX_RETRIES = 1000
MAX_TIMEOUT = 7 * 86400  # a week
MAX_BACKOFF = 86400  # a day


def _number(field, value, *, maximum, strict=False, integer=False):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        kind = "an integer" if integer else "a number"
        raise BadRequest(f"{field}: must be {kind}, not {_json_type(value)}", field)
    if isinstance(value, float) and not math.isfinite(value):
        raise BadRequest(f"{field}: must be a finite number", field)
    if value < 0 or (strict and value == 0):
        raise BadRequest(f"{field}: must be {'> 0' if strict else '>= 0'}", field)
    if value > maximum:
        raise BadRequest(f"{field}: must be at most {maximum}", field)
    return value


def _json_type(value):
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number")


def _text(field, value):
    if not isinstance(value, str):
        raise BadRequest(f"{field}: must be a string, not {_json_type(value)}", field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"{field}: is not valid Unicode (a lone surrogate escape)", field) from None
    return value


def canonical(body, required=()):
    """Map aliases to field names; unknown fields, both spellings of one field and missing
    required fields are errors."""
    unknown = sorted(k for k in body if k not in ALIASES)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise BadRequest(f"unknown field(s): {names}; known: {', '.join(ALIASES)}", unknown[0])
    out, given_as = {}, {}
    for name, value in body.items():
        field = ALIASES[name]
        if field in out:
            raise BadRequest(f"{field}: give {given_as[field]!r} or {name!r}, not both", field)
        out[field], given_as[field] = value, name
    for field in required:
        if out.get(field) is None:
            raise BadRequest(f"{field}: is required", field)
    return out


def queue_name(value, field="queue"):
    _text(field, value)
    try:
        return keys.check_queue_name(value)
    except InvalidQueueName as exc:
        raise BadRequest(f"{field}: {exc}", field) from None


def create_options(body):
    """``(queue, payload, enqueue kwargs)`` from a create body, or raise BadRequest."""
    f = canonical(body, required=("queue", "payload"))
    queue = queue_name(f["queue"])
    payload = _text("payload", f["payload"])
    limit = get_connection().config.max_payload_bytes
    size = len(payload.encode("utf-8"))
    if size > limit:
        raise BadRequest(f"payload: {size} bytes is over the limit of {limit} bytes", "payload")
    options = {
        "delay": _number("delay", f.get("delay"), maximum=MAX_DELAY),
        "retries": _number("retries", f.get("retries"), maximum=MAX_RETRIES, integer=True),
        "timeout": _number("timeout", f.get("timeout"), maximum=MAX_TIMEOUT, strict=True),
        "backoff": _number("backoff", f.get("backoff"), maximum=MAX_BACKOFF),
    }
    if f.get("callback") is not None:
        try:
            options["callback"] = check_callback(f["callback"])
        except InvalidCallback as exc:
            raise BadRequest(f"callback: {exc}", "callback") from None
    return queue, payload, {k: v for k, v in options.items() if v is not None}


def task_id(body):
    """The ``id`` of a seed-style ``{"id": ...}`` body."""
    unknown = sorted(k for k in body if k != "id")
    if unknown:
        raise BadRequest(f"unknown field(s): {', '.join(repr(k) for k in unknown)}; known: id", unknown[0])
    if body.get("id") is None:
        raise BadRequest("id: is required", "id")
    return _text("id", body["id"])
