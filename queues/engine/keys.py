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
- ``throughput`` [hash]  per-minute counters ``c<minute>`` / ``f<minute>`` for the last 24 h, and
                         per-hour ones ``C<hour>`` / ``F<hour>`` for the last 7 days
- ``depth``      [hash]  the queue's depth (tasks waiting to run) sampled once a minute by a
                         worker's heartbeat: ``m<minute>`` for 24 h, ``h<hour>`` for 7 days
                         (written from Python only, by ``upkeep.sample_depth``)
- ``timings``    [hash]  the charts' run and wait times over time: a histogram per minute (1 h),
                         per quarter hour (24 h) and per hour (7 d) under the ``durations``
                         bounds (fields in ``durations.py``); written by ``finish``, ``start``
                         and ``fail``, bounded by level, expiring 8 days after the last write;
                         and the same per handler name, with its outcome counts (``<k>.`` fields).
                         Built from the prefix in Lua, as ``ended`` is
- ``meta``       [hash]  queue settings (``paused``, ``created``, workers' timings) and the
                         heartbeat's clock: ``hb`` the queue's last beat, ``hg`` until when no
                         deadline is judged after a gap in its beats (ms; heartbeat.lua)
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
- ``outbox``     [zset]  ids of ended tasks whose children (``after=``) or batch must still be
                         told, in their own slots (score: when the task ended, ms); drained by
                         ``workflows.drain`` (right after, and by every worker's sweep)
- ``blocked``    [zset]  ids of tasks waiting for their parents (``after=``; score: enqueued, ms)
- ``batchruns``  [hash]  batch id -> how many of that batch's tasks of this queue are active
- ``once``       [zset]  keys of enqueues that must happen once ever (a batch's callbacks;
                         score: when, ms; kept 7 days)
- ``limits``     [hash]  the queue's limits (README "Limits"): the handler's values as workers
                         registered them (``hc``, ``hrn``/``hrw``, ``hpc``, ``hprn``/``hprw``), the
                         operator's overrides (``oc``... ``-`` for "none"), and the values in force
                         (``c``, ``rn``/``rw``, ``pc``, ``prn``/``prw``; absent: no limit); ``ro``
                         when the rate window opens again after a hold-back (ms)
- ``starts``     [zset]  the sliding window log of starts (member: the lease, score: Redis time,
                         ms), kept only while a rate is set; expires with its window
- ``partitions`` [hash]  partition key -> its state while it has tasks listed: ``r`` in the
                         ring, ``b`` held back by its concurrency (re-ringed when a slot frees),
                         ``w`` held back by its rate (in ``pwait``)
- ``ring``       [list]  the runnable partitions, served round-robin (one task per turn)
- ``pactive``    [zset]  partition key -> its active tasks (entries at 0 removed)
- ``pwait``      [zset]  partitions held back by their rate (score: when their window opens, ms)
- ``seen``       [zset]  ids enqueued by id with ``remember`` (the outbox's pushes; score: when,
                         ms), kept for ``WORQR["ENQUEUE_DEDUP_FOR"]``: enqueueing one of them
                         again is a no-op even after its task finished (kept by ``drop``, like
                         ``leases``, so a task is never run twice because it was pushed twice)
- ``ended``      [zset]  the tasks that ended lately (completed, failed for good, cancelled,
                         deleted; member: the id's 16 hex digits, the queue going without
                         saying; score: end time ms * 4 + outcome, ``ENDED_OUTCOMES``), so that
                         a child enqueued ``after=`` a parent that has just ended and left
                         nothing (no kept result) counts its outcome; the last ``ENDED_MAX``,
                         for ``ENDED_KEEP_MS`` at most (trimmed by the scripts that end tasks).
                         The one queue key a script builds from the prefix (``PREFIX ..
                         '@@ended@@'``) rather than taking it in KEYS: every script that ends a
                         task writes it, and adding it to their keys would rename 15 scripts.
                         Beyond ``ENDED_MAX``, a task that ended within the longest window in
                         ``resend`` stays (so that an enqueue sent again after a lost reply finds
                         its task ended and adds nothing: enqueue is idempotent by id)
- ``resend``     [zset]  the windows within which the queue's producers may send an enqueue again
                         (a retry after a lost reply: ``ENQUEUE_RETRY_FOR`` + the socket timeout,
                         in whole seconds; member: the window, ms; score: until when a call
                         with that window was made recently enough to be sent again, ms); a
                         handful of entries, written at most once per window per producer
                         setting, those past their time removed then (a quiet queue keeps its
                         last, ~100 bytes; drop deletes it). Built from the prefix, as ``ended`` is
- ``history``    [hash]  the record of ended tasks (completed, cancelled, failed for good): id ->
                         a JSON object of the task's fields (``task.py``) with its outcome in
                         ``s``, ``fin`` when it ended, its payload up to ``HISTORY_PAYLOAD_MAX``
                         bytes (``ps`` its size when cut) and ``log`` its last
                         ``HISTORY_LOG_LINES`` lines (``ln`` how many it had); pruned by the
                         workers (``history.py``) by ``WORQR["RETENTION"]``. Built from the
                         prefix, as ``ended`` is (``lua/includes/history.lua``)
- ``hcompleted``, ``hcancelled``, ``hfailed`` [zset] the ids in ``history`` by outcome (score:
                         when the task ended, ms), read newest first and pruned oldest first
- ``again``      [hash]  a task enqueued by "Run again" -> the id of the task it runs again
                         (``history.run_again``); pruned with its record
- ``kept``       [hash]  the slots kept by handlers still running after their outcome was
                         recorded (a timeout, a cancel of a sync handler): ``<id>:<lease>`` ->
                         its partition key (``''``: none). Each counts under the queue's
                         ``concurrency`` (with ``active``) and stays in ``pactive`` until the
                         handler returns (``release``) or its worker is reaped; written only when
                         the queue has a concurrency or the task a partition. Built from the
                         prefix in Lua (``PREFIX .. '@@kept@@'``), as ``ended`` is
- ``expired``    [list]  the tasks that expired (``expires=``) before they started, newest first,
                         each a JSON object (id, ``c`` created, ``ex`` the expiry, ``at`` when it
                         was found expired, ms; ``tg`` tags); the last ``EXPIRED_MAX``. Built from
                         the prefix in Lua (``lua/includes/expiry.lua``), as ``ended`` is
- ``holds``      [hash]  partitions held back by a handler's ``RateLimited``: partition key ->
                         until when (ms); the queue's own hold is ``hu`` in ``limits``
                         (``lua/includes/holds.lua``; built from the prefix, as ``ended`` is)

Keys built inside a script from the queue's prefix and a kind below (``SUBKEY_KINDS``):

- ``task:<id>``       [hash]   one task (fields in ``task.py``)
- ``worker:<name>``   [set]    ids of this queue's tasks held by that worker
- ``held:<name>``     [hash]   locks a worker keeps after reporting an outcome while the handler
                               still runs (``<id>:<lease>`` -> lock key, ``''`` when it keeps
                               only slots, in ``kept``), until it really stops
- ``lock:<key>``      [string] the holder of a lock, ``<id>:<lease>``, always with an expiry
- ``lockwait:<key>``  [list]   ids of tasks waiting for that lock, in order
- ``links:<id>``     [hash]   a task's children (``after=``) and ending: one field per child id,
                               ``=`` its outcome once it ended (completed, failed, cancelled,
                               deleted), ``b`` its batch, ``rt`` the traceparent of the run
                               span that ended it (tracing on); kept a day after it ended
- ``parents:<id>``   [hash]   a blocked task's parents: parent id -> ``w`` (waiting) or the
                               parent's outcome once told
- ``plist:<key>``     [list]   the runnable tasks of one partition, oldest first
- ``pstarts:<key>``   [zset]   one partition's sliding window log of starts (as ``starts``)
- ``schedule:<name>`` [hash]   one schedule: its settings as synced (``spec``, JSON, and its
                               version ``v``) and its state (``paused``, ``last``, ``last_id``,
                               ``last_tick``, counters and the lateness histogram; ``schedules.py``)
- ``tag:<tag>``       [zset]   the tag index: ids of the queue's tasks carrying that tag (score:
                               created, ms); an id leaves it when its task is deleted, cancelled or
                               completed (``forget`` in ``lua/includes/base.lua``), so it holds
                               live and failed tasks only and never outlives them
- ``throttle:<key>``  [string] the task that opened a throttle window (``throttle=``), expiring
                               with the window (``lua/includes/controls.lua``)
- ``debounce:<key>``  [string] the task of a debounce key not started yet (``debounce=``),
                               expiring an hour after its quiet period
- ``log:<id>``        [list]   a task's log lines (``task.log``), the last ``TASK_LOG_MAX``; kept
                               while the task lives (and with a failed task), deleted with it

Batch keys live in the batch's own slot, ``worqr:{batch:<id>}:<kind>`` (``BATCH_KINDS``; a
colon can't appear in a queue name, so no queue shares it): ``batch`` [hash] (description,
callbacks, state, counters, times, ``rt``: the run span that ended its last task, tracing on),
``live`` [set] (ids of its tasks not ended yet),
``tasks`` [list] (every id, in order; for the batch page) and ``queues`` [set] (queues it uses).
``worqr:batches`` [zset] lists every batch (score: created, ms) and ``worqr:batches-due``
[zset] those whose callbacks are not enqueued yet (swept by workers).

Channels: ``worqr:{<queue>}:events`` (every transition, for dashboards) and
``worqr:control:<worker>`` (a worker's wake-ups, hand-overs, cancels, and orders to go quiet or stop).

Global keys: ``worqr:queues`` (known queues), ``worqr:workers`` (the worker registry),
``worqr:heartbeat:<worker>``, ``worqr:schedules`` (schedule name -> queue),
``worqr:deploys`` (deploy markers for the charts), ``worqr:schedule-queues`` (the queues that have had schedules), ``worqr:schedules-live`` (the
schedules made at run time, name -> their settings), ``worqr:workers:gone`` (the
last ``GONE_WORKERS_MAX`` workers that stopped or were found dead, newest first),
``worqr:workers:gone-check`` (the turn of the check for dead workers, with an expiry), the
workers' queue sweep's (``sweep.py``): ``worqr:summary`` (its sums over every queue, JSON),
``worqr:queues-idle`` (a hash: queue -> when it was found empty and its ``enqueued`` counter
then) and ``worqr:sweeper`` (the sweeping worker's name, a lease with an expiry), and the
channel ``worqr:schedule-changes`` (schedules added, changed, paused or resumed: sleeping
schedulers re-read them).
"""

import re

from .errors import InvalidQueueName, InvalidTask, InvalidWorkerName

PREFIX = "worqr"

QUEUE_NAME_MAX = 200
LOCK_KEY_MAX = 200
#: Tags: at most TAGS_MAX per task, each 1 to TAG_MAX characters without a newline.
TAG_MAX = 100
TAGS_MAX = 20
#: Lines kept in a task's log (a ring: the oldest go first).
TASK_LOG_MAX = 1000
#: Gone workers remembered (``GONE_WORKERS``).
GONE_WORKERS_MAX = 100
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
    "timings",
    "depth",
    "leases",
    "schedules",
    "outbox",
    "blocked",
    "batchruns",
    "once",
    "limits",
    "starts",
    "partitions",
    "ring",
    "pactive",
    "pwait",
    "seen",
    "ended",
    "kept",
    "resend",
    "expired",
    "holds",
    "history",
    "hcompleted",
    "hcancelled",
    "hfailed",
    "again",
)

#: Expired tasks listed per queue (``expired``): the newest this many.
EXPIRED_MAX = 1000

#: The record of recently ended tasks (``ended``): kept at most this long (ms; the whole key
#: expires this long after the queue's last end), and at most this many per queue (about 120
#: bytes of Redis memory each) beyond those that ended within the ``resend`` window; outcomes by
#: their code (score % 4). A call that ends tasks trims at most ``ENDED_TRIM_MAX`` entries.
ENDED_KEEP_MS = 86_400_000
ENDED_MAX = 10_000
ENDED_TRIM_MAX = 2_000
ENDED_OUTCOMES = ("completed", "failed", "cancelled", "deleted")

#: The record of ended tasks (``history``): a task's payload is kept up to this many bytes (and
#: its traceback's last this many), with its last ``HISTORY_LOG_LINES`` log lines.
HISTORY_PAYLOAD_MAX = 4096
HISTORY_LOG_LINES = 20
#: The outcomes a record is kept for, each with its index (``h<outcome>``).
HISTORY_OUTCOMES = ("completed", "cancelled", "failed")


def history_index(queue, outcome):
    """The index of the records of ``queue``'s tasks that ended with ``outcome`` (a zset)."""
    if outcome not in HISTORY_OUTCOMES:
        raise ValueError(f"no history is kept for {outcome!r}")
    return queue_key(queue, "h" + outcome)


#: Kinds of a batch's keys (in its own slot, ``worqr:{batch:<id>}:<kind>``).
BATCH_KINDS = ("batch", "live", "tasks", "queues")

#: Kinds of the keys a script builds from the queue's prefix: ``<prefix><kind>:<suffix>``.
SUBKEY_KINDS = {
    "task": "task",
    "worker": "worker",
    "held": "held",
    "lock": "lock",
    "lockwait": "lockwait",
    "schedule": "schedule",
    "links": "links",
    "parents": "parents",
    "plist": "plist",
    "pstarts": "pstarts",
    "tag": "tag",
    "log": "log",
    "throttle": "throttle",
    "debounce": "debounce",
}
#: The suffix of a queue's event channel.
EVENTS = "events"

# Global keys (never used inside a Lua script).
KNOWN_QUEUES = f"{PREFIX}:queues"
#: The sums over every queue of the workers' sweep's last pass (JSON; ``engine.sweep``).
SUMMARY = f"{PREFIX}:summary"
#: The queues the sweep found empty, and when (``engine.sweep``: forgotten once idle long enough).
QUEUES_IDLE = f"{PREFIX}:queues-idle"
#: Who sweeps the queues now (one worker at a time; its name, with an expiry).
SWEEPER = f"{PREFIX}:sweeper"
WORKER_REGISTRY = f"{PREFIX}:workers"
#: Every schedule's queue (a hash name -> queue; only ever read and written from Python): the
#: schedule of that name in another queue (left by a concurrent sync) is ignored.
SCHEDULES = f"{PREFIX}:schedules"
#: Deploy markers (a zset, score: when, ms; member: JSON {label, at}; ``deploys.py``), the last 500.
DEPLOYS = f"{PREFIX}:deploys"
#: The schedules made at run time (``live_schedules``): name -> their settings as given (JSON; a
#: hash, only ever read and written from Python). A worker's sync of its settings leaves them.
LIVE_SCHEDULES = f"{PREFIX}:schedules-live"
#: The queues that have had schedules (a set; only ever read and written from Python).
SCHEDULE_QUEUES = f"{PREFIX}:schedule-queues"
#: The last GONE_WORKERS_MAX workers gone (a list of JSON objects, newest first; only ever read
#: and written from Python): ``{"name", "how": "stopped" | "reaped", "at": ms, ...}``.
GONE_WORKERS = f"{PREFIX}:workers:gone"
#: The turn of the check for workers that died (``upkeep.note_gone_workers_due``): set, with an
#: expiry, by the worker that takes it.
GONE_CHECK = f"{PREFIX}:workers:gone-check"
#: A bulk action's progress (a hash; ``bulk_job_key``), kept a day after it ends.
BULK_PREFIX = f"{PREFIX}:bulk:"
#: Channel telling workers' schedulers that schedules changed (synced, paused, resumed).
SCHEDULE_CHANGES = f"{PREFIX}:schedule-changes"
#: Every batch (a zset, score: created ms) and those whose callbacks are still to enqueue.
BATCHES = f"{PREFIX}:batches"
BATCHES_DUE = f"{PREFIX}:batches-due"
#: Channel on which batches' progress is announced (for the dashboard).
BATCH_EVENTS = f"{PREFIX}:batch-events"
#: Pattern matching every queue's event channel.
ALL_QUEUE_EVENTS = f"{PREFIX}:{{*}}:events"


def check_queue_name(name):
    """Return ``name`` if it is a valid queue name, else raise InvalidQueueName."""
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
    if not isinstance(name, str) or not name or len(name) > WORKER_NAME_MAX:
        raise InvalidWorkerName(f"worker name must be 1 to {WORKER_NAME_MAX} characters")
    if not _WORKER_RE.fullmatch(name):
        raise InvalidWorkerName(f"worker name {name!r} may only hold letters, digits and . _ - @ + :")
    return name


def check_lock_key(key):
    """Return ``key`` if it can name a lock (any non-empty text up to 200 characters)."""
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


def tag_key(queue, tag):
    """``worqr:{<queue>}:tag:<tag>``: the ids of the queue's tasks carrying ``tag``."""
    return subkey(queue, "tag", tag)


def task_log_key(queue, task_id):
    """``worqr:{<queue>}:log:<id>``: the task's log lines."""
    return subkey(queue, "log", task_id)


def bulk_job_key(job_id):
    """``worqr:bulk:<id>``: a bulk action's progress (written and read from Python only)."""
    return f"{BULK_PREFIX}{job_id}"


def check_tags(tags):
    """Return ``tags`` as a list of unique strings (order kept) if valid, else raise InvalidTask."""
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise InvalidTask(f"tags must be a list of strings, not {tags!r}")
    out = []
    for tag in tags:
        if not isinstance(tag, str) or not tag or len(tag) > TAG_MAX or "\n" in tag or "\r" in tag:
            raise InvalidTask(f"each tag must be a string of 1 to {TAG_MAX} characters without a newline, not {tag!r}")
        if tag not in out:
            out.append(tag)
    if len(out) > TAGS_MAX:
        raise InvalidTask(f"a task may carry at most {TAGS_MAX} tags, not {len(out)}")
    return out


def lock_key(queue, lock):
    return subkey(queue, "lock", lock)


def lock_wait_key(queue, lock):
    return subkey(queue, "lockwait", lock)


def partition_list_key(queue, partition):
    """``worqr:{<queue>}:plist:<key>``: the runnable tasks of one partition."""
    return subkey(queue, "plist", partition)


def partition_starts_key(queue, partition):
    """``worqr:{<queue>}:pstarts:<key>``: one partition's log of starts (its rate window)."""
    return subkey(queue, "pstarts", partition)


def schedule_key(queue, name):
    """``worqr:{<queue>}:schedule:<name>``: one schedule's settings and state."""
    return subkey(queue, "schedule", name)


def links_key(queue, task_id):
    return subkey(queue, "links", task_id)


def parents_key(queue, task_id):
    return subkey(queue, "parents", task_id)


_BATCH_RE = re.compile(r"b-[0-9a-f]{16}")


def batch_slot(batch_id):
    """The pseudo queue name scripts run under for a batch: its keys are ``worqr:{batch:<id>}:*``."""
    return f"batch:{batch_id}"


def batch_key(batch_id, kind):
    return f"{PREFIX}:{{batch:{batch_id}}}:{kind}"


def is_batch_id(value):
    return isinstance(value, str) and bool(_BATCH_RE.fullmatch(value))


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
