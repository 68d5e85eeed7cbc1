"""The worker's calls: take and acknowledge (``start``, ``finish``), fail, give back, release,
register, beat, leave, wake, report progress; and the Task a delivery describes."""

import dataclasses
from dataclasses import dataclass

from ..codes import Code
from ..task import Task, decode_payload
from ..text import lossy
from ._call import Call, _code, _codes, _ms, _traces


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
    # Built as Task(...) would be, without its generated __init__ (its 38 parameters were a tenth
    # of a chunk drain's worker time): the defaults, then the delivery's fields.
    task = _new_task(Task)
    fields_ = task.__dict__
    fields_.update(_TASK_DEFAULTS)
    fields_["id"], fields_["queue"] = task_id.decode(), queue
    fields_["payload"], fields_["state"] = decode_payload(payload, kind), "active"
    fields_["attempt"], fields_["lease"] = int(attempt), int(lease)
    fields_["timeout"] = timeout if timeout > 0 else None
    fields_["callback"], fields_["meta"] = callback.decode() or None, meta.decode() or None
    fields_["retries"] = int(retries) if retries else None
    fields_["trace_context"], fields_["batch_id"] = trace.decode() or None, batch.decode() or None
    return task


#: Task's fields with their defaults (every field has one but ``id`` and ``queue``, set above).
_TASK_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Task) if f.default is not dataclasses.MISSING}
_new_task = object.__new__


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
    """An ack is (id, lease, result, keep), or with a 5th item, the run span's traceparent ('' for
    none), and a 6th, the handler's name (its charts; '' for none): sent as n traceparents then n
    names after the quadruples, each block only when some ack has one (the names need the
    traceparents before them, '' for each then)."""
    args = tuple(x for a in acks for x in (a[0], a[1], a[2], "k" if a[3] else ""))
    names = _traces(acks, 5)
    traces = _traces(acks, 4) or (("",) * len(acks) if names else ())
    return args + traces + names


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
    hold="",
    handler="",
):
    """Report a failed attempt (or, with ``retry_after`` seconds, a deferral that uses no
    attempt). ``keep``: the handler still runs; its lock stays held until ``release``.
    ``trace``: the run span's traceparent (tracing on), kept with the task's end. ``hold``
    (with ``retry_after``: a ``RateLimited``): ``"q"`` the queue or ``"p"`` the task's partition
    starts nothing for ``retry_after``, and the task goes back first in line. ``handler``: the
    handler's name (a Tasks framework function's path), for its own charts."""
    args = (
        worker,
        task_id,
        lease,
        lossy(error),  # a handler's text: a lone surrogate in it can't go to Redis as it is
        lossy(traceback),
        retries,
        backoff,
        backoff_max,
        jitter,
        history,
        "" if retry_after is None else max(0.0, retry_after),
        "k" if keep else "",
    )
    if trace or hold or handler:
        args += (trace,)
    if hold or handler:
        args += (hold,)
    if handler:
        args += (handler,)
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
        fraction = "" if fraction is None else repr(float(fraction))
        args += [task_id, lease, fraction, lossy(message or ""), len(lines), *map(lossy, lines)]
    return Call("progress", queue, (len(reports), *args), _codes)
