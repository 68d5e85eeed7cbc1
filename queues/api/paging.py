"""Lists of the HTTP API paged by name: ``?after=<name>&limit=<n>`` (queues, schedules)."""

from ..engine import keys
from ..engine.errors import InvalidQueueName
from ..quoting import QUEUE_NAME_RULE, shown
from .errors import BadRequest


def name_page(params, default, maximum, kind="queue"):
    """(after, limit) of a list paged by name (``?after=<name>&limit=<n>``): the items named after
    ``after`` (None: from the first; a name as a queue's, called a ``kind`` name in the error),
    ``limit`` of them (``default``, at most ``maximum``); else BadRequest naming the parameter."""
    after = params.get("after")
    if after is not None:
        try:
            keys.check_queue_name(after)
        except InvalidQueueName:
            raise BadRequest(f"after: {shown(after)} is not a {kind} name ({QUEUE_NAME_RULE})", "after") from None
    raw = params.get("limit")
    if raw is None:
        return after, default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 7 and 1 <= int(raw) <= maximum):
        raise BadRequest(f"limit: must be an integer from 1 to {maximum}, not {shown(raw, 20)}", "limit")
    return after, int(raw)
