"""The read model: every read of Redis that dashboards, commands, metrics and the HTTP API
show, and the only place besides the scripts and the workers' upkeep that knows the keys' layout
and the task hash's field names. It only reads (``tests/test_shape.py`` checks that no module of
this package sends a write command): the writes that keep what it shows tidy, the gone workers'
record and the depth history, are the workers' (``engine.upkeep``). Never unbounded scans: every
list is read a page at a time and every count is a length or a counter kept by Redis; a search
looks at a bounded number of entries per call and returns a cursor to go on. A queue's counts are
read by one script (``counts``), so they are consistent.

By subject, each in its module, all used as ``readmodel.<name>``:

- queues (``_queues``): ``known_queues``, ``queue_exists``, ``is_paused``, ``queue_counts``,
  ``counts_of``, ``overview``, ``summary``, ``queue_page``, ``pending``, ``delayed``,
  ``blocked``, ``failed``, ``active``, ``failed_ids``, ``failures``, ``failures_signature``,
  ``locks``, ``in_flight``;
- tasks (``_tasks``): ``task``, ``task_states``, ``task_log``, ``tagged``, ``tagged_count``,
  ``bulk_job``;
- workers (``_workers``): ``workers``, ``worker``, ``workers_active``, ``worker_tasks``,
  ``gone_workers``, ``without_heartbeat``;
- workflows (``_workflows``): ``links``, ``links_many``, ``parents``, ``task_ends``, ``workflow``, ``children_of``,
  ``outbox``, ``batch_tasks``, ``batch_live``, ``batches``, ``batches_due``; and ``batch``, one
  batch (``engine.batchinfo``: below ``task``, whose ``Task.batch`` reads it);
- limits (``_limits``): ``limits``, ``limited_queues``;
- schedules (``_schedules``): ``schedule_index``, ``schedule_queue``, ``schedule_hashes``,
  ``live_schedules``;
- search: the language, parsed (``_search_syntax``: ``parse_search``, ``Search``,
  ``SearchError``), and searches run (``_search``: ``search``, ``search_total``,
  ``SearchPage``);
- ended tasks (``_ended``): ``Ended``, ``ended_task``, ``ended_tasks``, ``ended_counts``, ``again_of``, ``schedule_runs``,
  ``ended_from_record``;
- failed tasks across queues (``_failed_all``): ``failed_all``, ``FailedAll``;
- history (``_history``): ``throughput``, ``history``, ``timings``, ``handlers``, ``handler_slot``,
  ``durations``, ``deploys``, ``duration_percentiles``;
- controls (``_controls``): ``expired``;
- the server (``_common``): ``server_ms``, ``subscriber_connections``.
"""

from ..batchinfo import read as batch
from ._common import server_ms, subscriber_connections
from ._controls import expired
from ._ended import Ended, again_of, ended_counts, ended_from_record, ended_task, ended_tasks, schedule_runs
from ._failed_all import FAILED_PER_QUEUE, FailedAll, failed_all
from ._history import (
    HISTORY_SPANS,
    deploys,
    duration_percentiles,
    durations,
    handler_slot,
    handlers,
    history,
    throughput,
    timings,
)
from ._limits import PARKED_COUNTED, limited_queues, limits
from ._queues import (
    PARTITIONS_SHOWN,
    active,
    blocked,
    counts_of,
    delayed,
    failed,
    failed_ids,
    failures,
    failures_signature,
    in_flight,
    is_paused,
    known_queues,
    locks,
    overview,
    pending,
    queue_counts,
    queue_exists,
    queue_page,
    summary,
)
from ._schedules import live_schedules, schedule_hashes, schedule_index, schedule_queue
from ._search import PROBED, TOTAL_QUEUES, SearchPage, search, search_total
from ._search_syntax import SEARCH_QUALIFIERS, SEARCH_STATES, Search, SearchError, parse_search
from ._tasks import bulk_job, tagged, tagged_count, task, task_log, task_states
from ._workers import gone_workers, without_heartbeat, worker, worker_tasks, workers, workers_active
from ._workflows import (
    batch_live,
    batch_tasks,
    batches,
    batches_due,
    children_of,
    links,
    links_many,
    outbox,
    parents,
    task_ends,
    workflow,
)

__all__ = [
    "HISTORY_SPANS",
    "PARKED_COUNTED",
    "PARTITIONS_SHOWN",
    "PROBED",
    "SEARCH_QUALIFIERS",
    "SEARCH_STATES",
    "TOTAL_QUEUES",
    "Ended",
    "FAILED_PER_QUEUE",
    "FailedAll",
    "Search",
    "SearchError",
    "SearchPage",
    "active",
    "again_of",
    "batch",
    "batch_live",
    "batch_tasks",
    "batches",
    "batches_due",
    "blocked",
    "bulk_job",
    "counts_of",
    "delayed",
    "deploys",
    "duration_percentiles",
    "durations",
    "ended_counts",
    "ended_from_record",
    "ended_task",
    "ended_tasks",
    "failed",
    "failed_all",
    "failed_ids",
    "expired",
    "failures",
    "failures_signature",
    "gone_workers",
    "history",
    "timings",
    "handlers",
    "handler_slot",
    "in_flight",
    "is_paused",
    "known_queues",
    "limited_queues",
    "limits",
    "links",
    "live_schedules",
    "links_many",
    "locks",
    "outbox",
    "overview",
    "parents",
    "parse_search",
    "pending",
    "queue_counts",
    "queue_exists",
    "queue_page",
    "schedule_hashes",
    "schedule_index",
    "schedule_runs",
    "schedule_queue",
    "search",
    "search_total",
    "server_ms",
    "subscriber_connections",
    "summary",
    "tagged",
    "tagged_count",
    "task",
    "task_ends",
    "workflow",
    "children_of",
    "task_log",
    "task_states",
    "throughput",
    "without_heartbeat",
    "worker",
    "worker_tasks",
    "workers",
    "workers_active",
]
