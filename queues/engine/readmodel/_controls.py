"""Reads of the task controls (``engine.controls``): the tasks that expired before they started."""

import json
from datetime import UTC, datetime

from .. import keys


def _at(ms):
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def expired(client, queue, limit=100):
    """The newest tasks of ``queue`` that expired before they started (``expires=``), newest
    first, at most ``limit`` (the queue keeps the last ``keys.EXPIRED_MAX``): dicts with ``id``,
    ``state`` ("expired"), ``created_at``, ``expires_at``, ``expired_at`` (aware datetimes) and
    ``tags``."""
    limit = max(0, min(int(limit), keys.EXPIRED_MAX))
    if not limit:
        return []
    out = []
    for raw in client.lrange(keys.queue_key(queue, "expired"), 0, limit - 1):
        entry = json.loads(raw)
        out.append(
            {
                "id": entry["id"],
                "state": "expired",
                "created_at": _at(entry.get("c")),
                "expires_at": _at(entry.get("ex")),
                "expired_at": _at(entry.get("at")),
                "tags": entry["tg"].split("\n") if entry.get("tg") else [],
            }
        )
    return out
