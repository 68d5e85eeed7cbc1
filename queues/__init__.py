"""worqr: a reliable, atomic work queue on Redis, run from Django.

``from queues import Queue, handler`` is the public API; the engine below ``queues.engine``
imports nothing from Django. ``Queue`` is the engine's Queue plus ``on_commit=True``
(``queues.transactions``); it is imported lazily so that importing ``queues.engine`` alone never
imports Django.
"""

from typing import TYPE_CHECKING

from .engine import (
    Batch,
    ChunkFailed,
    RateLimited,
    RedisUnavailable,
    RetryLater,
    Task,
    TooManyQueues,
    chain,
    handler,
)

if TYPE_CHECKING:  # type checkers see the class; at run time it is imported on first use (below)
    from .transactions import Queue

__all__ = [
    "Batch",
    "ChunkFailed",
    "Queue",
    "RateLimited",
    "RedisUnavailable",
    "RetryLater",
    "Task",
    "TooManyQueues",
    "chain",
    "handler",
    "mark_deploy",
]


def __getattr__(name):
    if name == "Queue":
        # Here, not at the top: ``import queues.engine`` runs this package first, and the engine
        # alone must not import Django (transactions imports django.db).
        from .transactions import Queue

        return Queue
    if name == "mark_deploy":
        # Here, not at the top, as Queue: it reads Django's settings (the engine alone must not).
        from .deploys import mark_deploy

        return mark_deploy
    raise AttributeError(f"module 'queues' has no attribute {name!r}")
