"""The engine's calls to its Lua scripts: one function per script, and the only place that
knows each script's arguments (ARGV order) and the shape of its reply.

Each function returns a ``Call``; run it with ``call.run(client)`` (a synchronous client) or
``await call.arun(client)`` (an asyncio one), which returns the parsed reply. Codes in replies
are ``codes.Code`` (``commands.Code``); ``error_for`` turns a negative one into the typed error that names the
script, the queue and the task. ``Queue``, the worker and the tests call these, never
``scripts.run`` with raw arguments.

By subject, each in its module, all used as ``commands.<name>``: the call itself and reply
codes' errors (``_call``), adding tasks (``_producing``), the worker's calls (``_running``), a
generator handler's checkpoints (``_checkpoints``), a
queue's counts and managing it (``_managing``), the record of ended tasks (``_history``), workflows and batches (``_workflows``), and
schedules (``_schedules``).
"""

from ..codes import Code
from ._call import Call, check, error_for, run_pipelined
from ._checkpoints import checkpoint, checkpoint_begin
from ._history import note_again, prune_history
from ._managing import Counts, cancel, counts, delete, drop, forget, pause, purge, reseal, retry, run_now, set_limits
from ._producing import ENQUEUE_OPTIONS, TASK_OPTIONS, Enqueued, enqueue, enqueue_one, push
from ._running import (
    DELIVERY_FIELDS,
    Started,
    fail,
    finish,
    heartbeat,
    progress,
    register,
    release,
    start,
    stop,
    task_from_fields,
    task_from_handover,
    unregister,
    wake,
)
from ._schedules import Fired, fire, schedule_pause, schedule_remove, schedule_sync, trigger
from ._workflows import (
    batch_add,
    batch_callbacks_done,
    batch_close,
    batch_open,
    batch_tell,
    link,
    outbox_done,
    resolve,
)

__all__ = [
    "Code",
    "Call",
    "check",
    "error_for",
    "run_pipelined",
    "Counts",
    "counts",
    "cancel",
    "delete",
    "retry",
    "run_now",
    "reseal",
    "pause",
    "set_limits",
    "purge",
    "forget",
    "drop",
    "prune_history",
    "note_again",
    "TASK_OPTIONS",
    "ENQUEUE_OPTIONS",
    "Enqueued",
    "enqueue",
    "push",
    "enqueue_one",
    "DELIVERY_FIELDS",
    "Started",
    "task_from_fields",
    "task_from_handover",
    "start",
    "finish",
    "fail",
    "stop",
    "release",
    "register",
    "heartbeat",
    "unregister",
    "wake",
    "progress",
    "checkpoint_begin",
    "checkpoint",
    "Fired",
    "fire",
    "trigger",
    "schedule_sync",
    "schedule_remove",
    "schedule_pause",
    "link",
    "resolve",
    "outbox_done",
    "batch_open",
    "batch_add",
    "batch_tell",
    "batch_close",
    "batch_callbacks_done",
]
