"""Every Redis key and channel name worqr uses is built here, and nowhere else.

Per-queue keys carry the queue name as a Redis Cluster hash tag, ``worqr:{<queue>}:<kind>``, so
every key one Lua script touches lives in the same slot. The few global keys (the list of known
queues, the worker registry and the workers' heartbeat keys) are never touched from Lua.

Queue keys (``QUEUE_KINDS``; the type is in brackets):

- ``pending``    [list]  ids of runnable tasks, oldest at the head (FIFO)
- ``front``      [list]  runnable tasks that go before ``pending``: tasks given back (pushed at
                         its head) and lock waiters whose turn came (appended, in order)
- ``delayed``    [zset]  ids of tasks waiting for their due time (score: due, ms)
- ``active``     [zset]  ids of tasks in process (score: start time, ms)
- ``deadlines``  [zset]  ids of active tasks with a timeout (score: time after which the
                         holder is no longer trusted, ms)
- ``failed``     [zset]  dead-letter store: ids of tasks out of attempts (score: failed at, ms)
- ``failures``   [list]  the last N failures, newest first, each a JSON object
- ``stats``      [hash]  counters: enqueued, completed, failed, failures, retried, cancelled,
                         deleted; ``waiting`` (tasks on lock wait lists) and ``gone`` (entries of
                         ``front``/``pending`` whose task was removed: skipped when reached)
- ``throughput`` [hash]  per-minute counters ``c<minute>`` / ``f<minute>`` for the last 24 h
- ``meta``       [hash]  queue settings (``paused``, ``created``, workers' timings)
- ``workers``    [zset]  workers serving the queue (score: heartbeat deadline, ms)
- ``idle``       [set]   workers waiting for work on the queue (woken on new work)
- ``unique``     [hash]  unique key -> id of the live task holding it
- ``lockwaits``  [zset]  lock keys with tasks waiting (score: when to re-check the lock, ms)
- ``lockheads``  [hash]  lock key -> the runnable task that is next to take that lock (at most
                         one runnable task per lock; the others wait on the lock's wait list)
- ``results``    [zset]  ids of finished tasks whose result is kept (score: expiry, ms)
- ``leases``     [string] the queue's lease counter: every delivery takes the next number (kept
                         by ``drop``, so a lease is never used twice in a queue)
- ``durations``  [hash]  histogram of run durations: ``le:<bound s>`` counts (not cumulative;
                         ``le:+Inf`` holds the rest), ``count`` and ``sum`` (seconds)
- ``schedules``  [zset]  the periodic tasks (schedules) whose runs go to this queue (score: the
                         next run, ms; ``+inf`` while paused or disabled)
- ``seen``       [zset]  ids enqueued by id with ``remember`` (the outbox's pushes; score: when,
                         ms), kept for ``WORQR["ENQUEUE_DEDUP_FOR"]``: enqueueing one of them
                         again is a no-op even after its task finished (kept by ``drop``, like
                         ``leases``, so a task is never run twice because it was pushed twice)

Keys built inside a script from the queue's prefix and a kind below (``SUBKEY_KINDS``):

- ``task:<id>``       [hash]   one task (fields in ``task.py``)
- ``worker:<name>``   [set]    ids of this queue's tasks held by that worker
- ``held:<name>``     [hash]   locks a worker keeps after reporting an outcome while the handler
                               still runs (``<id>:<lease>`` -> lock key), until it really stops
- ``lock:<key>``      [string] the holder of a lock, ``<id>:<lease>``, always with an expiry
- ``lockwait:<key>``  [list]   ids of tasks waiting for that lock, in order
- ``schedule:<name>`` [hash]   one schedule: its settings as synced (``spec``, JSON, and its
                               version ``v``) and its state (``paused``, ``last``, ``last_id``,
                               ``last_tick``, counters and the lateness histogram; ``schedules.py``)

Channels: ``worqr:{<queue>}:events`` (every transition, for dashboards) and
``worqr:control:<worker>`` (a worker's wake-ups, hand-overs and cancels).

Global keys: ``worqr:queues`` (known queues), ``worqr:workers`` (the worker registry),
``worqr:heartbeat:<worker>``, ``worqr:schedules`` (schedule name -> queue),
``worqr:schedule-queues`` (the queues that have had schedules) and the
channel ``worqr:schedule-changes`` (schedules added, changed, paused or resumed: sleeping
schedulers re-read them).
"""

import re

PREFIX = "worqr"

QUEUE_NAME_MAX = 200
LOCK_KEY_MAX = 200
WORKER_NAME_MAX = 200

# Letters, digits, and . _ - @ + ; never { } : / whitespace (they would break the hash tag, the
# key layout, task ids or URLs). Must start with a letter or digit so it can't look like an option.
_QUEUE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]*")
_WORKER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+:-]*")

QUEUE_KINDS = (
    "pending",
    "front",
    "delayed",
    "active",
    "deadlines",
    "failed",
    "failures",
    "stats",
    "throughput",
    "meta",
    "workers",
    "idle",
    "unique",
    "lockwaits",
    "lockheads",
    "results",
    "durations",
    "leases",
    "schedules",
    "seen",
)

#: Kinds of the keys a script builds from the queue's prefix: ``<prefix><kind>:<suffix>``.
SUBKEY_KINDS = {
    "task": "task",
    "worker": "worker",
    "held": "held",
    "lock": "lock",
    "lockwait": "lockwait",
    "schedule": "schedule",
}
#: The suffix of a queue's event channel.
EVENTS = "events"

# Global keys (never used inside a Lua script).
KNOWN_QUEUES = f"{PREFIX}:queues"
WORKER_REGISTRY = f"{PREFIX}:workers"
#: Every schedule's queue (a hash name -> queue; only ever read and written from Python): the
#: schedule of that name in another queue (left by a concurrent sync) is ignored.
SCHEDULES = f"{PREFIX}:schedules"
#: The queues that have had schedules (a set; only ever read and written from Python).
SCHEDULE_QUEUES = f"{PREFIX}:schedule-queues"
#: Channel telling workers' schedulers that schedules changed (synced, paused, resumed).
SCHEDULE_CHANGES = f"{PREFIX}:schedule-changes"
#: Pattern matching every queue's event channel.
ALL_QUEUE_EVENTS = f"{PREFIX}:{{*}}:events"


def check_queue_name(name):
    """Return ``name`` if it is a valid queue name, else raise InvalidQueueName."""
    from .errors import InvalidQueueName

    if not isinstance(name, str):
        raise InvalidQueueName(f"queue name must be a string, not {type(name).__name__}")
    if not name:
        raise InvalidQueueName("queue name must not be empty")
    if len(name) > QUEUE_NAME_MAX:
        raise InvalidQueueName(f"queue name is longer than {QUEUE_NAME_MAX} characters")
    if not _QUEUE_RE.fullmatch(name):
        raise InvalidQueueName(
            f"queue name {name!r} may only hold letters, digits and . _ - @ + "
            "(no braces, colons, slashes or whitespace) and must start with a letter or digit"
        )
    return name


def check_worker_name(name):
    """Return ``name`` if it is a valid worker name, else raise InvalidWorkerName."""
    from .errors import InvalidWorkerName

    if not isinstance(name, str) or not name or len(name) > WORKER_NAME_MAX:
        raise InvalidWorkerName(f"worker name must be 1 to {WORKER_NAME_MAX} characters")
    if not _WORKER_RE.fullmatch(name):
        raise InvalidWorkerName(f"worker name {name!r} may only hold letters, digits and . _ - @ + :")
    return name


def check_lock_key(key):
    """Return ``key`` if it can name a lock (any non-empty text up to 200 characters)."""
    from .errors import InvalidTask

    if not isinstance(key, str) or not key or len(key) > LOCK_KEY_MAX:
        raise InvalidTask(f"lock key must be a non-empty string of at most {LOCK_KEY_MAX} characters")
    return key


def queue_key(queue, kind):
    """``worqr:{<queue>}:<kind>``."""
    return f"{PREFIX}:{{{queue}}}:{kind}"


def queue_prefix(queue):
    """``worqr:{<queue>}:``: scripts append ``task:<id>``, ``lock:<key>``... to it."""
    return f"{PREFIX}:{{{queue}}}:"


def subkey(queue, kind, suffix):
    """``worqr:{<queue>}:<kind>:<suffix>`` for a kind of ``SUBKEY_KINDS``."""
    return f"{PREFIX}:{{{queue}}}:{SUBKEY_KINDS[kind]}:{suffix}"


def task_key(queue, task_id):
    return subkey(queue, "task", task_id)


def worker_tasks_key(queue, worker):
    return subkey(queue, "worker", worker)


def held_locks_key(queue, worker):
    return subkey(queue, "held", worker)


def lock_key(queue, lock):
    return subkey(queue, "lock", lock)


def lock_wait_key(queue, lock):
    return subkey(queue, "lockwait", lock)


def schedule_key(queue, name):
    """``worqr:{<queue>}:schedule:<name>``: one schedule's settings and state."""
    return subkey(queue, "schedule", name)


def queue_events_channel(queue):
    """The channel every transition of ``queue`` is published on (for dashboards)."""
    return f"{PREFIX}:{{{queue}}}:{EVENTS}"


def heartbeat_key(worker):
    """The worker's heartbeat key: exists while the worker is alive (TTL refreshed each beat)."""
    return f"{PREFIX}:heartbeat:{worker}"


CONTROL_PREFIX = f"{PREFIX}:control:"


def worker_channel(worker):
    """The one channel a worker listens on: wake-ups, hand-overs and cancels."""
    return f"{CONTROL_PREFIX}{worker}"


def queue_from_task_id(task_id):
    """The queue a task id belongs to (ids are ``<queue>-<16 hex digits>``), or None."""
    if not isinstance(task_id, str) or len(task_id) < 18 or task_id[-17] != "-":
        return None
    queue, suffix = task_id[:-17], task_id[-16:]
    if not _HEX16.fullmatch(suffix):
        return None
    try:
        return check_queue_name(queue)
    except Exception:
        return None


_HEX16 = re.compile(r"[0-9a-f]{16}")


#: Channel on which access changes (a logout, a user deactivated, a permission removed) are
#: announced to the dashboard's open sockets, in every server process (``queues.dashboard.revocation``).
ACCESS_CHANGES = f"{PREFIX}:access"
