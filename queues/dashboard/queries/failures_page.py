"""The Failures tab: the tasks failed for good across every queue, grouped by error shape
(``dashboard.failures``), the most recently seen group first, each with the ids its retry and
delete act on."""

from ...engine import readmodel
from ..bounds import preview
from ..failures import group_failures
from .common import fmt, server_ms

#: Failures listed per group (the group's count and its actions cover all it holds).
SHOWN_PER_GROUP = 5


def failures_all(client):
    found = readmodel.failed_all(client)
    entries = [
        {
            "id": t.id,
            "queue": t.queue,
            "error": t.error or "",
            "failed_at": t.failed_at,
            "attempts": t.attempt,
            "task": t,
        }
        for t in found.tasks
    ]
    groups = []
    for g in group_failures(entries, items=None):
        groups.append(
            {
                "key": g["key"],
                "type": g["type"],
                "shape": g["shape"],
                "count": g["count"],
                "last_seen": fmt(g["last_seen"]),
                "first_seen": fmt(g["first_seen"]),
                "example": preview(g["example"], 300),
                "queues": sorted({e["queue"] for e in g["failures"]}),
                "ids": [e["id"] for e in g["failures"]],
                "shown": [
                    {
                        "id": e["id"],
                        "queue": e["queue"],
                        "failed": fmt(e["failed_at"]),
                        "attempts": e["attempts"],
                        "error": preview(e["error"], 200),
                        "payload": preview(e["task"].payload),
                    }
                    for e in g["failures"][:SHOWN_PER_GROUP]
                ],
            }
        )
    return {
        "view": "failures",
        "now_ms": server_ms(client),
        "groups": groups,
        "read": len(entries),
        "counts": sorted(found.counts.items(), key=lambda kv: -kv[1]),
        "total": sum(found.counts.values()),
        "looked": found.looked,
        "queues": found.queues,
        "more_queues": found.more_queues,
        "per_queue": readmodel.FAILED_PER_QUEUE,
    }
