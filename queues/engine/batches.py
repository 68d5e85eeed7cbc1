"""Batches: a group of tasks, across queues, tracked with O(1) work per finished task, whose
callbacks are enqueued exactly once after it is closed and every task has ended.

    batch = Batch(on_success=("reports", "nightly-done"), on_complete=("audit", "nightly"),
                  description="nightly import")
    batch.enqueue("imports", "row-1"); batch.enqueue_many("imports", rows, retries=2)
    batch.close()
    Batch.get(batch.id)

How it stays exact (each batch is its own slot, ``worqr:{batch:<id>}``; ``keys``):

- ``enqueue`` reserves the ids in the batch (``batch_add``: refused once closed) before the tasks
  are enqueued in their queue, so no task can end uncounted;
- a task's end is recorded in its queue (``links``, the outbox) and told to the batch by
  ``workflows.drain``; ``batch_tell`` counts it only when it leaves the batch's ``live`` set, so a
  repeated step counts nothing twice;
- the batch finishes in the step that counts its last task after ``close``: its state becomes
  ``succeeded`` (no task failed or was cancelled) or ``finished_with_failures``, and its callbacks
  are due. They are enqueued with a once key in their queue (``once``: a repeat after a crash adds
  nothing) and then marked done; ``worqr:batches-due`` lists closed batches until then, so every
  worker's sweep finishes the job of a process that died midway.

A task counts by its first end: retrying a failed task of a batch later does not change the
batch's counts (nor fire its callbacks again).
"""

import json
import os
import time
from collections.abc import Iterable
from functools import partial
from typing import Any, Unpack

from . import batchinfo, commands, crypto, enqueueing, keys, readmodel, text, tracing
from .batch_ends import callback_task_id, fire_callbacks, sweep, tell
from .codes import Code
from .connection import get_default
from .errors import InvalidInput, InvalidState, InvalidTask, PayloadTooLarge, WorqrError
from .options import BatchOptions, Payload, check_names, refuse_controls
from .queue import Queue
from .sending import Sending

__all__ = ["Batch", "BatchNotFound", "new_batch_id", "tell", "fire_callbacks", "sweep"]

#: Ids reserved per batch_add call; tasks per enqueue call, and enqueue calls per round trip.
_ADD_CHUNK = 5000
_ENQUEUE_CHUNK = 500
_PIPELINE = 20


class BatchNotFound(WorqrError, LookupError):
    """No batch of that id."""


def new_batch_id():
    return f"b-{os.urandom(8).hex()}"


def _callback(name, value, batch_id, config):
    """'' or the JSON [queue, payload, kind] of a callback (queue, payload); raises on bad input.
    Kind '' text, 'b' bytes (as latin-1 text), 'e' sealed for the callback's task (its queue is
    encrypted: the payload is never in clear in Redis, ``crypto``), as latin-1 text. A payload
    is bounded as an enqueue's is (``MAX_PAYLOAD_BYTES``)."""
    if value is None:
        return ""
    if not isinstance(value, tuple) or len(value) != 2:
        raise InvalidInput(f"{name} must be a (queue, payload) tuple, not {value!r}")
    queue, payload = value
    keys.check_queue_name(queue)
    if isinstance(payload, str):
        try:
            raw, kind = text.payload(payload), ""  # as an enqueue encodes it
        except InvalidTask as exc:
            raise InvalidTask(f"{name}: {exc}") from None
    elif isinstance(payload, (bytes, bytearray)):
        raw, kind = bytes(payload), "b"
    else:
        raise InvalidInput(f"{name}: the payload must be str or bytes, not {type(payload).__name__}")
    if len(raw) > config.max_payload_bytes:
        raise PayloadTooLarge(
            f"{name}: payload of {len(raw)} bytes is over the limit of "
            f"{config.max_payload_bytes} bytes (WORQR['MAX_PAYLOAD_BYTES'])"
        )
    try:  # its queue's handler takes it (its lock or partition function), as the enqueue will
        enqueueing.prepare(config, queue, [payload])
    except InvalidTask as exc:
        raise InvalidTask(f"{name}: {exc}") from exc
    if crypto.encrypts(config, queue):
        task_id = callback_task_id(queue, batch_id, "success" if name == "on_success" else "complete")
        return json.dumps([queue, crypto.keyring(config).seal(queue, task_id, raw, kind).decode("latin-1"), "e"])
    if kind == "b":
        return json.dumps([queue, raw.decode("latin-1"), "b"])
    return json.dumps([queue, payload, ""])


class Batch:
    """A batch of tasks (see the module doc). ``Batch(...)`` opens a new one; ``Batch.get(id)``
    reads one; ``Batch.open(id)`` gives a handle on an existing one (to add to or close it)."""

    def __init__(
        self,
        on_success: tuple[str, Payload] | None = None,
        on_complete: tuple[str, Payload] | None = None,
        description: str = "",
        *,
        connection: Any = None,
        _id: str | None = None,
    ) -> None:
        self._connection = connection
        if _id is not None:
            self.id = _id
            return
        if not isinstance(description, str) or len(description) > 1000:
            raise InvalidInput("description must be a string of at most 1000 characters")
        text.checked("description", description)
        self.id = new_batch_id()
        config = self.connection.config
        success = _callback("on_success", on_success, self.id, config)
        complete = _callback("on_complete", on_complete, self.id, config)
        created = commands.batch_open(self.id, description, success, complete).run(self.client)
        self.client.zadd(keys.BATCHES, {self.id: created})

    def __repr__(self):
        return f"<Batch {self.id}>"

    @property
    def connection(self):
        return self._connection or get_default()

    @property
    def client(self):
        return self.connection.client

    @classmethod
    def open(cls, batch_id: str, connection: Any = None) -> "Batch":
        """A handle on an existing batch (to add tasks to it, close or cancel it)."""
        if not keys.is_batch_id(batch_id):
            raise InvalidInput(f"{batch_id!r} is not a batch id")
        return cls(connection=connection, _id=batch_id)

    @classmethod
    def get(cls, batch_id: str, connection: Any = None) -> dict[str, Any] | None:
        """The batch as a dict: id, description, state ("open", "running", "succeeded",
        "finished_with_failures"), total, pending, active, completed, failed, cancelled,
        created_at, finished_at (and closed, cancel_requested, callbacks, queues); None if unknown."""
        return batchinfo.get(batch_id, connection)

    # -- adding tasks ----------------------------------------------------------------------

    def enqueue(self, queue: str, payload: Payload, **options: Unpack[BatchOptions]) -> str:
        """Add one task to the batch, in ``queue``; returns its id. Options as ``Queue.enqueue``."""
        return self.enqueue_many(queue, [payload], **options)[0]

    def enqueue_many(self, queue: str, payloads: Iterable[Payload], **options: Unpack[BatchOptions]) -> list[str]:
        """Add tasks to the batch, in ``queue``, in bulk; returns their ids. Options as
        ``Queue.enqueue_many`` (``unique`` and the task controls excepted: a batch's task must be
        its own, and is written by a script of its own). A closed batch refuses them
        (InvalidState), and nothing is written."""
        check_names(options)  # a misspelt option: InvalidTask naming it
        refuse_controls(options, "a batch's tasks")
        payloads = list(payloads)
        if options.get("unique"):
            raise InvalidTask("a batch's tasks can't be unique (each must be its own task)")
        if "ids" in options:
            raise InvalidTask("a batch makes its tasks' ids")
        queue = keys.check_queue_name(queue)
        connection = self.connection
        if "after" in options or "on_parent_failure" in options:
            raise InvalidTask("a batch's tasks can't wait for other tasks (after=)")
        # everything checked before anything is written
        checked = enqueueing.prepare(connection.config, queue, payloads, **options)
        if payloads:  # MAX_QUEUES, before the batch counts them
            enqueueing.check_room(connection.client, queue, connection.config.max_queues)
        ids = [enqueueing.new_task_id(queue) for _ in payloads]
        for i in range(0, max(len(ids), 1), _ADD_CHUNK):
            code = commands.batch_add(self.id, queue, ids[i : i + _ADD_CHUNK]).run(self.client)
            if code == Code.UNKNOWN:
                raise BatchNotFound(f"no such batch {self.id}")
            if code == Code.FINISHED:
                raise InvalidState(f"batch {self.id} is closed: no more tasks can be added")
        if not payloads:
            return []
        if checked is None:  # a handler's lock function puts them under several locks
            return enqueueing.enqueue_many(connection, queue, payloads, options, ids=ids, batch=self.id, remember=False)
        if getattr(connection.client, "worqr_replicas", None):  # each call waits for its replicas
            return enqueueing.enqueue_prepared(connection, queue, checked, ids, batch=self.id, remember=False).ids
        if not tracing.enabled(connection.config):
            return self._send_pipelined(connection, queue, checked, ids)
        with tracing.enqueue_span(queue, len(ids)) as (span, trace):
            out = self._send_pipelined(connection, queue, checked, ids, trace)
            tracing.enqueued(span, out)
            return out

    def _send_pipelined(self, connection, queue, checked, ids, trace=""):
        """Enqueue in calls of 500 tasks (each atomic), 20 calls per round trip, retried as every
        enqueue is (``sending``: a round trip whose replies were lost is sent again, adding
        nothing)."""
        when, opts, items = checked
        options = dict(zip(commands.TASK_OPTIONS, opts, strict=True))
        items = [(ids[i], *rest) for i, rest in enumerate(items)]
        sending = Sending(connection, queue, ids)
        calls = [
            commands.enqueue(
                queue,
                items[s : s + _ENQUEUE_CHUNK],
                when=when,
                trace=trace,
                batch=self.id,
                window=sending.window,
                **options,
            )
            for s in range(0, len(items), _ENQUEUE_CHUNK)
        ]
        client, new = connection.enqueue_client, False
        for g in range(0, len(calls), _PIPELINE):
            group = calls[g : g + _PIPELINE]
            carried = min(len(items), (g + len(group)) * _ENQUEUE_CHUNK) - g * _ENQUEUE_CHUNK
            for enqueued in sending.send(partial(commands.run_pipelined, client, group), carried):
                new = new or enqueued.is_new_queue
                sending.done(enqueued.ids)
        if new:
            sending.known()
        return sending.added

    # -- ending ----------------------------------------------------------------------------

    def close(self) -> None:
        """No more tasks: the callbacks fire once every task has ended (now, if all have)."""
        self._close(cancel=False)

    def cancel(self) -> int:
        """Close the batch and cancel every unfinished task (running ones are told to stop).
        Returns how many were asked to cancel."""
        self._close(cancel=True)
        asked, cursor = 0, 0
        while True:
            cursor, ids = readmodel.batch_live(self.client, self.id, cursor)
            never = []
            for task_id in ids:
                queue = keys.queue_from_task_id(task_id)
                try:
                    if Queue(queue, self._connection).cancel_outcome(task_id) is not None:
                        asked += 1
                    else:
                        never.append(task_id)
                except InvalidState:
                    pass  # ended meanwhile (failed): told to the batch by the drain
            # reserved but never enqueued (its producer died): it ends here, as cancelled
            ends = readmodel.task_ends(self.client, never) if never else {}
            gone = [(i, "cancelled") for i in never if ends[i] is None]
            if gone:
                asked += len(gone)
                tell(self.client, self.id, gone)
            if cursor == 0:
                break
        return asked

    def _close(self, cancel):
        self.client.zadd(keys.BATCHES_DUE, {self.id: _now_ms()}, nx=True)
        code, finished = commands.batch_close(self.id, cancel).run(self.client)
        if code == Code.UNKNOWN:
            self.client.zrem(keys.BATCHES_DUE, self.id)
            raise BatchNotFound(f"no such batch {self.id}")
        if finished:
            fire_callbacks(self.client, self.id)


def _now_ms():
    return int(time.time() * 1000)
