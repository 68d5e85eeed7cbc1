"""Page snapshots: what each dashboard page shows, as JSON-friendly dicts, formatted from what
the engine's read model (``queues.engine.readmodel``, the only reader of Redis) returns.

The views render them into templates and the live feeds push them over the websocket, so a
page and its updates always show the same thing. Nothing here touches Django's UI.
Times are strings in UTC (``YYYY-MM-DD HH:MM:SS``) with epoch milliseconds beside them where
the browser needs to compute (elapsed times, due in).

Organised by page: ``common`` (what they share), ``queue_pages`` (the overview, a queue, its
failures and history), ``worker_pages``, ``task_page`` and ``batch_pages``; the pages' functions
are named here.
"""

from .batch_pages import (
    BATCH_STATES,
    GRAPH_NODES,
    batch,
    batch_exists,
    batch_filtered,
    batch_graph,
    batch_row,
    batches,
    workflow_graph,
)
from .common import epoch_ms, fmt, server_ms, task_row, throughput
from .failures_page import failures_all
from .queue_pages import (
    FailureCache,
    failures,
    history,
    limits_view,
    overview,
    queue,
    queue_exists,
    timings,
    totals_of,
)
from .task_page import ended, relatives, shows_task, task, task_shown
from .worker_pages import gone_workers, worker, workers, workers_page, workers_view

__all__ = [
    "GRAPH_NODES",
    "FailureCache",
    "BATCH_STATES",
    "batch",
    "batch_exists",
    "batch_filtered",
    "batch_row",
    "batch_graph",
    "workflow_graph",
    "batches",
    "ended",
    "epoch_ms",
    "failures",
    "failures_all",
    "fmt",
    "gone_workers",
    "history",
    "timings",
    "limits_view",
    "overview",
    "queue",
    "queue_exists",
    "relatives",
    "server_ms",
    "shows_task",
    "task",
    "task_row",
    "task_shown",
    "throughput",
    "totals_of",
    "worker",
    "workers",
    "workers_page",
    "workers_view",
]
