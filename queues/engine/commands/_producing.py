"""Adding tasks: ``enqueue``, ``push`` (its short script for one task, no options) and
``enqueue_one`` (the common call, straight on a client)."""

import time
from dataclasses import dataclass

from .. import scripts
from ..codes import Code
from ..errors import NotReplicated
from ._call import Call, _ms


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


#: The per-task options ``enqueueing.prepare`` checks (and gives as a list, in this order),
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
    a queue that does not exist is left so, and the reply says ``no_queue``; ``enqueueing`` checks
    ``MAX_QUEUES`` then calls again); ``window`` (seconds, 0 for none): the call may be sent
    again within it (a retry after a lost reply), so the tasks that end meanwhile are kept in the
    record of ended tasks that long; ``controls``: the (expires, throttle, debounce) arguments
    ``controls.check`` made. Returns ``Enqueued``; an id whose task exists already, or
    ended lately (the last ``keys.ENDED_MAX``, and all within the queue's longest window), is
    left as it is."""
    controls = options.pop("controls", ("", "", ""))  # after the items: controls.check
    unknown = options.keys() - ENQUEUE_OPTIONS.keys()
    if unknown:
        raise TypeError(f"enqueue() got unknown options: {', '.join(sorted(unknown))}")
    given = {**ENQUEUE_OPTIONS, **options}
    given["tags"], given["remember"] = "\n".join(given["tags"]), _ms(given["remember"])
    given["create"] = "1" if given["create"] else ""
    given["window"] = _ms(given["window"])
    flat = [x for item in items for x in item]
    return Call("enqueue", queue, (len(items), *given.values(), *flat, *controls), _enqueued, durable="strict")


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
