"""The engine's calls to its Lua scripts: one function per script, and the only place that
knows each script's arguments (ARGV order) and the shape of its reply.

Each function returns a ``Call``; run it with ``call.run(client)`` (a synchronous client) or
``await call.arun(client)`` (an asyncio one), which returns the parsed reply. Codes in replies
are ``codes.Code``; ``error_for`` turns a negative one into the typed error that names the
script, the queue and the task. ``Queue``, the worker and the tests call these, never
``scripts.run`` with raw arguments.
"""

import time
from dataclasses import dataclass, field

from . import keys, scripts
from .codes import Code
from .errors import InvalidState, NotFinished, NotReplicated, StaleLease, TaskNotFound, WorkerLost
from .task import Task, decode_payload


def _ms(seconds):
    return int(seconds * 1000)


@dataclass(frozen=True)
class Call:
    """One script call, ready to run on a client."""

    script: str
    queue: str
    args: tuple
    parse: object = field(default=None, compare=False)
    #: A write that must reach ``MIN_REPLICAS_ACK`` replicas: ``strict`` (raise NotReplicated
    #: if it did not) or ``log`` (log it); None for the others (``scripts.run``).
    durable: str = None

    def run(self, client):
        try:
            reply = scripts.run(client, self.script, self.queue, *self.args, durable=self.durable)
        except NotReplicated as exc:
            exc.reply = self.parse(exc.reply) if self.parse else exc.reply
            if getattr(exc.reply, "no_queue", False):  # nothing was written: nothing to lose
                return exc.reply
            raise
        return self.parse(reply) if self.parse else reply

    async def arun(self, client):
        reply = await scripts.arun(client, self.script, self.queue, *self.args, durable=self.durable)
        return self.parse(reply) if self.parse else reply


def run_pipelined(client, calls):
    """Run several ``Call``s in one round trip (``scripts.run_pipelined``: on a Redis Cluster, one
    pipeline per master); returns their parsed replies in order. No wait for replicas: a
    ``durable`` call's replies are not checked against ``MIN_REPLICAS_ACK`` here."""
    calls = list(calls)
    replies = scripts.run_pipelined(client, [(c.script, c.queue, c.args) for c in calls])
    return [c.parse(r) if c.parse else r for c, r in zip(calls, replies)]


def _codes(reply):
    return [Code(c) for c in reply]


def _code(reply):
    return Code(reply)


# -- errors ----------------------------------------------------------------------------------

_MESSAGES = {
    Code.STALE: (StaleLease, "its lease is stale (the task was taken back and handed to another worker)"),
    Code.UNKNOWN: (TaskNotFound, "there is no such task (it never existed, or it has finished)"),
    Code.ACTIVE: (InvalidState, "it is running: cancel it instead"),
    Code.NOT_FAILED: (InvalidState, "it is not failed"),
    Code.FINISHED: (InvalidState, "it has already failed or completed: delete it instead"),
    Code.NOT_REGISTERED: (WorkerLost, "the worker is not registered (it was presumed dead)"),
    Code.NOT_FINISHED: (NotFinished, "it has not run yet (pending, delayed, waiting or blocked): cancel it instead"),
}


def error_for(code, script, queue, task_id=None):
    """The typed error for a negative reply ``code`` of ``script``, naming the task and queue."""
    kind, why = _MESSAGES[Code(code)]
    subject = f"task {task_id} of queue {queue}" if task_id else f"queue {queue}"
    return kind(f"{script}: {subject}: {why}")


def check(code, script, queue, task_id=None):
    """Return ``code`` if it is not an error code, else raise its error."""
    if code < 0:
        raise error_for(code, script, queue, task_id)
    return Code(code)


# -- reading ---------------------------------------------------------------------------------

#: Counters of a queue's stats hash that ``counts`` reads.
_STAT_NAMES = (
    "enqueued",
    "completed",
    "failed",
    "failures",
    "retried",
    "cancelled",
    "deleted",
    "waiting",
    "gone",
    "blocked",
    "plisted",
)


@dataclass(frozen=True)
class Counts:
    """A queue's counts, read at once: ``counts`` as ``readmodel.queue_counts`` gives them; the
    lengths of its front and pending lists and the number of runnable tasks listed in partitions
    (where a page of runnable tasks is read)."""

    counts: dict
    front: int
    listed: int
    partitioned: int


def _read_counts(reply):
    front, listed, delayed, active, failed, flat, paused = reply
    stats = dict(zip(flat[::2], flat[1::2]))
    counts = {name: int(stats.get(name.encode(), 0)) for name in _STAT_NAMES}
    gone = counts.pop("gone")
    partitioned = counts.pop("plisted")  # runnable tasks listed in their partitions
    counts["total_failed"] = counts.pop("failed")
    runnable = front + listed + partitioned - gone  # entries of removed tasks are skipped when reached
    counts.update(
        pending=runnable + counts["waiting"], runnable=runnable, delayed=delayed, active=active, failed=failed
    )
    counts["paused"] = bool(paused)
    return Counts(counts, front, listed, partitioned)


def counts(queue):
    """Read the queue's counts per state and lifetime counters in one step: returns ``Counts``."""
    return Call("counts", queue, (), _read_counts)


# -- producing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Enqueued:
    is_new_queue: bool
    now_ms: int
    ids: list
    #: The queue does not exist and the call was not to make it (``create=False``): nothing added.
    no_queue: bool = False


def _enqueued(reply):
    if reply[0] == Code.NO_QUEUE:
        return Enqueued(False, int(reply[1]), [], no_queue=True)
    return Enqueued(bool(reply[0]), int(reply[1]), [i.decode() for i in reply[2:]])


#: The per-task options ``Queue`` checks (``Queue._prepare`` gives them as a list, in this order),
#: as ``enqueue`` takes them.
TASK_OPTIONS = ("retries", "timeout", "backoff", "lock", "callback", "meta", "partition", "tags")

#: ``enqueue``'s options, in the order the script takes them after n, with their defaults (each
#: one means "not given").
ENQUEUE_OPTIONS = {
    "when": "",
    **dict.fromkeys(TASK_OPTIONS[:6], ""),
    "trace": "",
    "partition": "",
    "tags": (),
    "remember": 0,
    "parents": "",
    "batch": "",
    "batch_callback": "",
    "once": "",
    "create": True,
    "window": 0,
}


def enqueue(queue, items, **options):
    """Add tasks. ``items``: (id, payload bytes, unique key or '', 'b' if bytes else '').
    Options (``ENQUEUE_OPTIONS``): ``when``: '' now, '+<ms>' a delay, '@<ms>' a due time (Unix
    ms); ``retries``, ``timeout``, ``backoff``, ``lock``, ``callback``, ``meta`` are text, ''
    when not given; ``trace`` is the trace context delivered with the tasks (``tracing``);
    ``partition`` their partition key; ``tags`` (checked by ``keys.check_tags``) go into the
    queue's tag index; ``remember`` (seconds, 0 for not): the ids are remembered that long, and
    enqueueing one again meanwhile is a no-op even once its task finished (how the outbox's pushes
    are idempotent); ``parents`` the JSON ``{"p": [[parent id, 'w' or its outcome], ...], "ob":
    "run"}`` of tasks with ``after=`` (what ``link`` answered); ``batch`` the batch they belong
    to; ``batch_callback`` the batch they are a callback of; ``once`` a key used once ever (the
    call adds nothing if it was used); ``create``: whether the call may make the queue (False:
    a queue that does not exist is left so, and the reply says ``no_queue``; ``Queue`` checks
    ``MAX_QUEUES`` then calls again); ``window`` (seconds, 0 for none): the call may be sent
    again within it (a retry after a lost reply), so the tasks that end meanwhile are kept in the
    record of ended tasks that long. Returns ``Enqueued``; an id whose task exists already, or
    ended lately (the last ``keys.ENDED_MAX``, and all within the queue's longest window), is
    left as it is."""
    unknown = options.keys() - ENQUEUE_OPTIONS.keys()
    if unknown:
        raise TypeError(f"enqueue() got unknown options: {', '.join(sorted(unknown))}")
    given = {**ENQUEUE_OPTIONS, **options}
    given["tags"], given["remember"] = "\n".join(given["tags"]), _ms(given["remember"])
    given["create"] = "1" if given["create"] else ""
    given["window"] = _ms(given["window"])
    flat = [x for item in items for x in item]
    return Call("enqueue", queue, (len(items), *given.values(), *flat), _enqueued, durable="strict")


def _pushed(reply):
    return None if reply is None else _enqueued(reply)


def push(queue, task_id, payload, trace="", *, binary=False, create=True, window=0):
    """Add one task now with no options (``payload`` bytes; ``binary``: it was bytes, not text;
    ``trace`` its trace context, '' for none; ``create`` and ``window`` as ``enqueue``'s), unless
    a worker of the queue is idle or the queue has limits: then ``None``, nothing written (call
    ``enqueue`` instead). Otherwise ``Enqueued``; an id whose task exists already, or ended
    lately, is left as it is. Waits for no replica: the caller (``enqueue_one``) uses it only
    without ``MIN_REPLICAS_ACK``."""
    return Call("push", queue, _push_args(task_id, payload, trace, binary, create, window), _pushed)


def _push_args(task_id, payload, trace="", binary=False, create=True, window=0):
    """``push``'s arguments, in its ARGV order (for ``push`` and ``enqueue_one``)."""
    return (task_id, payload, "b" if binary else "", trace, "1" if create else "", _ms(window))


#: ``enqueue``'s arguments after n for one task now, with no options but a trace context,
#: whether it may make the queue and a window (``enqueue_one``): before the trace, between it
#: and ``create`` (the last two options).
_TRACE_AT = list(ENQUEUE_OPTIONS).index("trace")
_PLAIN = ("",) * _TRACE_AT, ("",) * (len(ENQUEUE_OPTIONS) - _TRACE_AT - 3)


#: Queues whose last ``push`` declined (an idle worker, or limits), and when: ``enqueue_one`` goes
#: straight to ``enqueue`` for them for ``_DECLINED_FOR`` seconds, so a queue whose workers wait
#: for work (where a pickup's latency counts) pays no declined call before each hand-over.
_declined = {}
_DECLINED_FOR = 1.0


def enqueue_one(client, queue, task_id, payload, trace="", create=False, window=0):
    """``enqueue`` of one task now, with no options but its trace context and window, run at
    once on a synchronous client (the common call, kept short; as durable as ``enqueue``):
    returns (whether the queue was new, the task's id), or (None, None) when the queue does not
    exist and ``create`` is False (nothing added). The short script ``push`` does it when it can
    (no idle worker to hand the task to, no limits to count, no replicas to wait for),
    ``enqueue`` when ``push`` declines (and, for a second, for the queue's next calls)."""
    # The hottest call of a producer: scripts.run straight, without a Call and its parsed reply
    # (measured 5-7 us more per enqueue through them, ~13 % of an enqueue's CPU).
    reply = None
    if not getattr(client, "worqr_replicas", None) and time.monotonic() - _declined.get(queue, -1e9) > _DECLINED_FOR:
        reply = scripts.run(client, "push", queue, *_push_args(task_id, payload, trace, create=create, window=window))
        if reply is None:
            if len(_declined) > 4096:  # queues made on the fly: keep it bounded
                _declined.clear()
            _declined[queue] = time.monotonic()
    if reply is None:
        before, after = _PLAIN
        args = (1, *before, trace, *after, "1" if create else "", _ms(window), task_id, payload, "", "")
        try:
            reply = scripts.run(client, "enqueue", queue, *args, durable="strict")
        except NotReplicated as exc:
            if exc.reply[0] != Code.NO_QUEUE:  # (no queue: nothing was written, nothing to lose)
                exc.reply = _enqueued(exc.reply)
                raise
            reply = exc.reply
    if reply[0] == Code.NO_QUEUE:
        return None, None
    return reply[0] == 1, reply[2].decode()


def link(queue, parents, children):
    """Link ``children`` (ids of tasks about to be enqueued) to ``parents`` of ``queue``:
    (OK, ['w' (linked) or the parent's outcome, ...]) or (UNKNOWN, index of the first unknown
    parent); nothing is written in the second case."""

    def parse(reply):
        if reply[0] == Code.UNKNOWN:
            return Code.UNKNOWN, int(reply[1]) - 1
        return Code.OK, [r.decode() for r in reply[1:]]

    parents, children = list(parents), list(children)
    return Call("link", queue, (len(parents), *parents, *children), parse, durable="strict")


def _traces(items, i):
    """The optional trailing traceparents of a call: item[i] of each item ('' for an item
    without), or () when no item has one (tracing off: the call is as it was)."""
    if not any(len(item) > i and item[i] for item in items):
        return ()
    return tuple(item[i] if len(item) > i else "" for item in items)


def resolve(queue, items):
    """Tell blocked tasks of ``queue`` that a parent ended: (child, parent, outcome[, the
    parent's run traceparent]) each. One code per item: 1 released, 2 cancelled, 3 still
    blocked, 0 nothing to do (told already)."""
    items = list(items)
    args = (len(items), *(x for item in items for x in item[:3]), *_traces(items, 3))
    return Call("resolve", queue, args, lambda r: [int(c) for c in r])


def outbox_done(queue, ids, forget=False):
    """Take ended tasks whose children and batch were told off the queue's outbox (``forget``:
    delete their links now, not a day later: the queue is being dropped)."""
    ids = list(ids)
    return Call("outbox_done", queue, (len(ids), *ids, "1" if forget else "0"), int, durable="log")


# -- the worker's calls ----------------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    status: Code
    due_in_ms: int
    tasks: list
    codes: list
    #: The start grace of the queue's rates (ms; 0: no rate): the tasks' handlers start within it
    #: of the call, or their tasks are given back unstarted (``limits.START_GRACE_FRACTION``).
    grace_ms: int = 0


#: Fields per delivery, in ``start``'s reply and in a hand-over message (``includes/take.lua``).
DELIVERY_FIELDS = 11


def task_from_fields(queue, fields):
    """The Task a delivery's 11 fields describe (from ``start``, or a hand-over message). A
    hand-over from an older version's enqueue script (during a rolling deploy) has 9 or 10: no
    trace, no batch."""
    task_id, payload, lease, attempt, timeout, callback, meta, retries, kind = fields[:9]
    trace = fields[9] if len(fields) > 9 else b""
    batch = fields[10] if len(fields) > 10 else b""
    timeout = float(timeout or 0)
    return Task(
        id=task_id.decode(),
        queue=queue,
        payload=decode_payload(payload, kind),
        state="active",
        attempt=int(attempt),
        lease=int(lease),
        timeout=timeout if timeout > 0 else None,
        callback=callback.decode() or None,
        meta=meta.decode() or None,
        retries=int(retries) if retries else None,
        trace_context=trace.decode() or None,
        batch_id=batch.decode() or None,
    )


def task_from_handover(data):
    """The Task a hand-over message carries: ``t <queue>\n`` then each delivery field written
    as ``<length>:<bytes>`` (the enqueue script's ``push_to_idle`` writes it)."""
    header, _, body = data.partition(b"\n")
    fields, i = [], 0
    while i < len(body):
        colon = body.index(b":", i)
        size = int(body[i:colon])
        fields.append(body[colon + 1 : colon + 1 + size])
        i = colon + 1 + size
    return task_from_fields(header[2:].decode(), fields)


def _ack_args(acks):
    """An ack is (id, lease, result, keep), or with a 5th item, the run span's traceparent."""
    args = tuple(x for a in acks for x in (a[0], a[1], a[2], "k" if a[3] else ""))
    return args + _traces(acks, 4) if any(len(a) > 4 for a in acks) else args


def start(queue, worker, count, *, lock_ttl, grace, default_timeout, result_ttl, acks=()):
    """Acknowledge ``acks`` ((id, lease, result, keep[, run traceparent]) each) and take up to
    ``count`` tasks.
    Returns ``Started``: status OK, PAUSED, MORE (call again), NOT_REGISTERED or LATE, the ms
    until the next delayed task is due (-1: none), the Tasks taken, one code per ack and the start
    grace."""
    acks = list(acks)

    def parse(reply):
        n = len(acks)
        head, codes = (reply[:-n], reply[-n:]) if n else (reply, [])
        fields = head[3:]
        size = DELIVERY_FIELDS
        tasks = [task_from_fields(queue, fields[i : i + size]) for i in range(0, len(fields), size)]
        return Started(Code(head[0]), int(head[1]), tasks, _codes(codes), int(head[2]))

    args = (
        worker,
        count,
        _ms(lock_ttl),
        _ms(grace),
        default_timeout or 0,
        _ms(result_ttl),
        len(acks),
        *_ack_args(acks),
    )
    return Call("start", queue, args, parse, durable="log" if acks else None)


def finish(queue, worker, acks, *, result_ttl):
    """Acknowledge ``acks`` ((id, lease, result, keep[, run traceparent]) each): one code per task."""
    acks = list(acks)
    return Call("finish", queue, (worker, len(acks), _ms(result_ttl), *_ack_args(acks)), _codes, durable="log")


def fail(
    queue,
    worker,
    task_id,
    lease,
    error,
    traceback,
    *,
    retries,
    backoff,
    backoff_max,
    jitter,
    history,
    retry_after=None,
    keep=False,
    trace="",
):
    """Report a failed attempt (or, with ``retry_after`` seconds, a deferral that uses no
    attempt). ``keep``: the handler still runs; its lock stays held until ``release``.
    ``trace``: the run span's traceparent (tracing on), kept with the task's end."""
    args = (
        worker,
        task_id,
        lease,
        error,
        traceback,
        retries,
        backoff,
        backoff_max,
        jitter,
        history,
        "" if retry_after is None else max(0.0, retry_after),
        "k" if keep else "",
    )
    if trace:
        args += (trace,)
    return Call("fail", queue, args, _code, durable="log")


def stop(queue, worker, items):
    """Give tasks back first in line, in the order given: (id, lease, keep) each; ``keep``: True
    (the handler still runs: its lock stays held until ``release``), False, or ``"unstarted"``
    (its handler never started: its start is not counted under the queue's rates either)."""
    items = list(items)
    flat = tuple(
        x
        for task_id, lease, keep in items
        for x in (task_id, lease, "u" if keep == "unstarted" else "k" if keep else "")
    )
    return Call("stop", queue, (worker, len(items), *flat), _codes, durable="log")


def release(queue, worker, holders):
    """The handlers of these (id, lease) deliveries have stopped: release the locks kept for them."""
    holders = list(holders)
    return Call("release", queue, (worker, len(holders), *(x for pair in holders for x in pair)))


def _gap_ms(ttl, interval):
    """The heartbeat's gap (lua/includes/beats.lua): beats of a queue further apart than
    HEARTBEAT_TTL minus HEARTBEAT_INTERVAL mean that no worker could beat (``interval`` None:
    a third of the TTL, the defaults' ratio)."""
    return _ms(ttl - (ttl / 3 if interval is None else interval))


def register(queue, worker, *, ttl, lock_ttl, grace, default_timeout, fresh, limits=None, interval=None):
    """Record ``worker`` as serving ``queue``; ``fresh``: a new process (an earlier worker of that
    name, presumed dead, is failed first). ``limits``: its handler's (``limits.Limits``; None: no
    limits); ``interval``: its HEARTBEAT_INTERVAL. Returns how many of its tasks went back."""
    limit_args = limits.script_args() if limits is not None else ("",) * 6
    args = (worker, _ms(ttl), _ms(lock_ttl), _ms(grace), default_timeout or 0, "1" if fresh else "0", *limit_args)
    return Call("register", queue, (*args, _gap_ms(ttl, interval)), int)


def heartbeat(queue, worker, *, ttl, lock_ttl, retries, backoff, backoff_max, jitter, history, interval=None):
    """Beat and housekeep (``interval``: the worker's HEARTBEAT_INTERVAL: beats of the queue
    further apart than the TTL minus that mean no worker could beat, and no deadline is judged
    for a TTL). Returns (status OK or NOT_REGISTERED, workers reaped, tasks recovered)."""
    args = (worker, _ms(ttl), _ms(lock_ttl), retries, backoff, backoff_max, jitter, history, _gap_ms(ttl, interval))
    return Call("heartbeat", queue, args, lambda r: (Code(r[0]), int(r[1]), int(r[2])))


def unregister(queue, worker, reason="worker_left"):
    """``worker`` leaves ``queue`` (or is failed: reason 'worker_failed'); its tasks go back."""
    return Call("unregister", queue, (worker, reason), int)


def wake(queue, n):
    """Pass a wake-up on to up to ``n`` idle workers."""
    return Call("wake", queue, (n,), int)


def progress(queue, reports):
    """Record handlers' reports: ``reports`` are (id, lease, fraction or None, message, lines)
    each. One code per report: OK, or STALE (the task is no longer active under that lease)."""
    reports, args = list(reports), []
    for task_id, lease, fraction, message, lines in reports:
        lines = list(lines)
        args += [task_id, lease, "" if fraction is None else repr(float(fraction)), message or "", len(lines), *lines]
    return Call("progress", queue, (len(reports), *args), _codes)


def prune_history(queue, cutoffs, max_per_queue, step):
    """Prune the record of ended tasks (``history.py``): ``cutoffs`` (ms, for completed,
    cancelled and failed). Returns (records removed, 1 if more are due)."""
    return Call("prune_history", queue, (*(int(c) for c in cutoffs), int(max_per_queue), int(step)), tuple)


def note_again(queue, pairs):
    """Note tasks run again: ``pairs`` (new id, id of the task it runs again) each."""
    pairs = list(pairs)
    return Call("note_again", queue, (len(pairs), *(i for pair in pairs for i in pair)), int)


# -- managing --------------------------------------------------------------------------------


def cancel(queue, task_id):
    """REMOVED, STOPPING (it runs; its worker is told), UNKNOWN or FINISHED."""
    return Call("cancel", queue, (task_id,), _code)


def delete(queue, ids, finished_only=False):
    """One code per id: DELETED, UNKNOWN, ACTIVE, or NOT_FINISHED (``finished_only``: only
    failed and completed tasks are deleted)."""
    ids = list(ids)
    return Call("delete", queue, ("1" if finished_only else "0", len(ids), *ids), _codes)


def retry(queue, ids):
    """One code per id: REQUEUED, UNKNOWN or NOT_FAILED."""
    ids = list(ids)
    return Call("retry", queue, (len(ids), *ids), _codes)


def pause(queue, paused):
    """Pause (True) or resume; returns whether the state changed."""
    return Call("pause", queue, ("1" if paused else "0",), bool)


def set_limits(queue, overrides=None, *, reset=False):
    """Override the queue's limits (``overrides``: six values as ``Limits.script_args`` gives them,
    each a number, '-' for none or '' to leave as is), after dropping every override if ``reset``."""
    return Call("set_limits", queue, ("reset" if reset else "set", *(overrides or ("",) * 6)), int)


def purge(queue, limit):
    """Delete up to ``limit`` waiting-to-run tasks: returns (deleted, more)."""
    return Call("purge", queue, (limit,), lambda r: (int(r[0]), bool(r[1])))


def forget(queue, enqueued):
    """Forget the queue if it is still idle and empty, and nothing was enqueued since its
    ``enqueued`` counter read ``enqueued`` (``engine.sweep``): True if it was."""
    return Call("forget", queue, (int(enqueued),), bool)


def drop(queue, limit):
    """Drop up to ``limit`` tasks, then the queue's keys: returns True while tasks are left."""
    return Call("drop", queue, (limit,), bool)


# -- schedules (periodic tasks) --------------------------------------------------------------


@dataclass(frozen=True)
class Fired:
    code: Code
    next_ms: int  # the schedule's next run, -1 if none (paused, disabled, gone)
    task_id: str | None
    late_ms: int
    is_new_queue: bool
    now_ms: int
    version: str | None  # the schedule's settings version in Redis


def _fired(reply):
    code, next_ms, task_id, late, new, now, version = reply
    return Fired(
        Code(code),
        int(next_ms),
        task_id.decode() or None if isinstance(task_id, bytes) else None,
        int(late),
        bool(new),
        int(now),
        version.decode() or None if isinstance(version, bytes) else None,
    )


def fire(queue, name, version, due_ms, next_ms, *, mode, grace_ms, task_id, meta):
    """Fire the tick ``due_ms`` of schedule ``name``: enqueue its run as ``task_id`` and move it to
    ``next_ms``, unless another call did first. ``mode``: 'tick' or 'missed'. Returns ``Fired``."""
    args = (name, version, int(due_ms), int(next_ms), mode, int(grace_ms), task_id, meta)
    return Call("fire", queue, args, _fired, durable="log")


def trigger(queue, name, task_id, meta, trace=""):
    """Enqueue one run of schedule ``name`` now (``trace``: the trigger's trace context): (OK or
    UNKNOWN, whether the queue was new)."""
    return Call("trigger", queue, (name, task_id, meta, trace), lambda r: (Code(r[0]), bool(r[1])), durable="strict")


def schedule_sync(queue, name, document, version, next_ms, *, enabled, paused_since=None):
    """Write a schedule's synced settings: 0 unchanged, 1 created, 2 changed."""
    args = (
        name,
        document,
        version,
        int(next_ms),
        "1" if enabled else "0",
        "" if paused_since is None else int(paused_since),
    )
    return Call("schedule_sync", queue, args, int)


def schedule_remove(queue, name):
    """Remove a schedule; returns whether it existed."""
    return Call("schedule_remove", queue, (name,), bool)


def schedule_pause(queue, name, paused, *, version="", next_ms=0):
    """Pause (True) or resume; 1 changed, 0 unchanged, or Code UNKNOWN / STALE (negative)."""
    return Call("schedule_pause", queue, (name, "1" if paused else "0", version, int(next_ms)), int)


# -- batches (each in its own slot: the "queue" of these calls is keys.batch_slot(id)) ---------


def batch_open(batch_id, description, on_success, on_complete):
    """Open a batch; the callbacks are '' or their JSON. Returns its created ms (0: it existed)."""
    return Call("batch_open", keys.batch_slot(batch_id), (description, on_success, on_complete), int, durable="strict")


def batch_add(batch_id, queue, ids):
    """Reserve ``ids`` (tasks about to be enqueued in ``queue``) in the batch: OK, UNKNOWN or
    FINISHED (it is closed)."""
    ids = list(ids)
    return Call("batch_add", keys.batch_slot(batch_id), (queue, len(ids), *ids), _code, durable="strict")


def batch_tell(batch_id, ended):
    """Tasks of the batch ended: (id, outcome[, the run's traceparent]) each. Returns True if the
    batch finished now."""
    ended = list(ended)
    args = (len(ended), *(x for e in ended for x in e[:2]), *_traces(ended, 2))
    return Call("batch_tell", keys.batch_slot(batch_id), args, bool)


def batch_close(batch_id, cancel=False):
    """Close the batch (``cancel``: and mark it cancelled): (OK or UNKNOWN, finished now)."""
    return Call("batch_close", keys.batch_slot(batch_id), ("1" if cancel else "0",), lambda r: (Code(r[0]), bool(r[1])))


def batch_callbacks_done(batch_id):
    """The batch's callbacks were enqueued: True if they were due."""
    return Call("batch_callbacks_done", keys.batch_slot(batch_id), (), bool, durable="log")
