"""Workflows' calls: linking children to parents (``link``), telling them a parent ended
(``resolve``), the outbox of ended tasks (``outbox_done``), and batches (each in its own slot: the
"queue" of these calls is ``keys.batch_slot(id)``)."""

from .. import keys
from ..codes import Code
from ._call import Call, _code, _traces


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
