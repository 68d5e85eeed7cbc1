"""The OpenAPI schema of a schedule's settings (``POST``/``PATCH /api/schedules/<name>``),
as ``WORQR["SCHEDULES"]`` has them, and the page parameters of ``GET /api/schedules``; part of
the document ``openapi.py`` serves."""

from ..engine import keys
from ..engine.schedule_settings import EVERY_MAX
from .bodies import MAX_BACKOFF, MAX_RETRIES, MAX_TIMEOUT, QUEUE_SCHEMA
from .schedules import PAGE_BYTES, SCHEDULES_PAGE, SCHEDULES_PAGE_MAX

#: What ``GET /api/schedules`` says of its pages.
SCHEDULE_LIST_SUMMARY = (
    "List the schedules (periodic tasks) with their next and last runs, by name, a page at a time "
    f"(`next`: the `after` of the next page, null on the last): `limit` of them ({SCHEDULES_PAGE} by "
    f"default, {SCHEDULES_PAGE_MAX:,} at most), fewer once their JSON reaches {PAGE_BYTES:,} bytes "
    "(a page holds one at least)"
)


def schedule_list_schema(schedule):
    """The answer of ``GET /api/schedules``: a page of ``schedule`` items, ``next`` and ``total``."""
    return {
        "type": "object",
        "required": ["schedules", "next", "total"],
        "properties": {
            "schedules": {"type": "array", "items": schedule},
            "next": {"type": ["string", "null"]},
            "total": {"type": "integer", "minimum": 0},
        },
    }


def schedule_list_parameters():
    """The query parameters of ``GET /api/schedules``: ``after`` (a schedule name) and ``limit``."""
    return [
        {"name": "after", "in": "query", "required": False, "schema": QUEUE_SCHEMA},
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": SCHEDULES_PAGE_MAX},
        },
    ]


def schedule_settings_schema(create):
    """A schedule's settings as WORQR['SCHEDULES'] has them (a create needs queue and one of
    cron and every; a change gives any of them)."""
    text = {"type": "string", "maxLength": 1000}
    return {
        "type": "object",
        "description": "A schedule's settings, as a WORQR['SCHEDULES'] entry has them: queue, exactly one of "
        "cron (5 fields or @hourly...; its validity is checked by the server, 400 naming 'cron') and every "
        "(seconds), payload, timezone (an IANA name, checked by the server: 400 naming 'timezone'), enabled, "
        "missed, overlap and the enqueue options. A change (PATCH) gives any of them; null removes an option.",
        "additionalProperties": False,
        "properties": {
            "queue": QUEUE_SCHEMA,
            "cron": text,
            "every": {"type": "number", "minimum": 1, "maximum": EVERY_MAX},
            "payload": {"type": "string", "description": "at most WORQR['MAX_PAYLOAD_BYTES'] bytes, as a task's"},
            "timezone": text,
            "enabled": {"type": "boolean"},
            "missed": {"enum": ["skip", "once"]},
            "overlap": {"type": "boolean"},
            "retries": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_RETRIES},
            "timeout": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT},
            "backoff": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_BACKOFF},
            "lock": {"type": ["string", "null"], "minLength": 1, "maxLength": keys.LOCK_KEY_MAX},
            "callback": {"type": ["string", "null"], "description": "as a task's: the server's allow-list applies"},
        },
        **({"required": ["queue"], "oneOf": [{"required": ["cron"]}, {"required": ["every"]}]} if create else {}),
    }
