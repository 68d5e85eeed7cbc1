"""Task: what a handler receives and what ``Queue.get`` returns.

A task is one Redis hash, ``worqr:{<queue>}:task:<id>``, with short field names:

====  =======================================================  ====  ===========================
p     payload, raw (what the producer gave) or in pieces:      s     state (absent: pending)
1..   ``1``, ``2``...: the payload's pieces (see below)
c     created (ms, Redis time)                                 a     attempts started
l     lease: a counter bumped on every delivery (fencing)      w     worker holding it
st    started (ms)                                             r     max retries
t     timeout (s)                                              b     backoff (s)
lk    lock key                                                 u     unique key
e     last error                                               tb    last traceback
due   due time (ms)                                            fa    failed at (ms)
cb    webhook callback URL                                     m     meta (opaque text)
x     cancel asked while running                               y     'b' if the payload is bytes
res   kept result                                              fin   finished at (ms)
tc    trace context: W3C traceparent (+ newline, tracestate)  tg    tags, one per line
pg    progress: a fraction, 0 to 1                             pm    progress message
np    parents not yet told (blocked)                       ob    'run': run even if a parent failed
bt    batch it belongs to                                  bc    batch it is a callback of
ex    expires at (ms): not started by then, never starts   th    its throttle key
db    its debounce key
ck    checkpoint (JSON) of a generator handler             ckt   checkpoint saved at (ms)
ckn   runs of a generator handler (each counted as it begins)
rd    ready to run since (ms): set as a delayed, retried,
      released or given-back task becomes runnable (its
      due time for a delayed one); wait times count from
      it, else from ``c`` (``durations.py``, the charts)
====  =======================================================  ====  ===========================

A payload longer than 64 bytes and at most ``PAYLOAD_PIECES_MAX`` × ``PAYLOAD_PIECE`` (1,008)
is written in pieces of ``PAYLOAD_PIECE`` (63) bytes, fields ``1``, ``2``... in order, instead of
``p``: Redis keeps a hash whose values are all at most ``hash-max-listpack-value`` (64 by default)
in its compact listpack encoding (one allocation), and a single longer value turns it into a
hashtable (an allocation per field, about 200 bytes more per task). The pieces are raw bytes,
joined back wherever the payload is read (``payload_from_hash`` here, ``joined_payload`` in the
scripts), so every reader sees exactly the payload given. 63, not 64: a listpack string under 64
bytes has a 1-byte header. Longer payloads stay whole in ``p`` (their own size dominates).

A running handler reports with ``task.progress(0.4, "rendered 40 of 100 pages")`` and
``task.log("line")`` (from sync and async handlers, and in a handler process): the worker sends
them to Redis in small batches (``worker.progress``); the log is a ring of the last 1,000 lines
(``keys.TASK_LOG_MAX``), kept while the task lives and with a failed task.

A generator handler's yields are its checkpoints (``worker/checkpoints.py``): the last one saved
is ``task.checkpoint`` when its next run begins (None on the first), kept in ``ck`` with the task.

``tc`` is set at enqueue when OpenTelemetry is on and the enqueue's span has a valid context
(``tracing``); it is delivered with the task, so its runs continue the enqueue's trace.

Enqueue writes a pending task without ``s`` (12 bytes less per task, which keeps a 100-byte
payload's hash in a smaller allocation): a hash with ``c`` (always written) and no ``s`` is
pending (``state_of`` in ``lua/includes/base.lua``, ``readmodel._tasks.state_of``, ``from_hash``).

States: pending, delayed, waiting (for a lock), blocked (waiting for parents, ``after=``),
active, failed, completed (only while a kept result lasts). Finished tasks are otherwise deleted.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import batchinfo
from .crypto import MAGIC, Sealed
from .errors import InvalidInput
from .replies import ms_to_datetime

__all__ = ["Task", "ms_to_datetime", "payload_from_hash", "decode_payload"]


#: Payload pieces (see above): at most this many, of this many bytes.
PAYLOAD_PIECE = 63
PAYLOAD_PIECES_MAX = 16
#: The hash's fields that hold the payload: whole, or its pieces in order.
PAYLOAD_FIELDS = ("p", *(str(i) for i in range(1, PAYLOAD_PIECES_MAX + 1)))
_PIECE_FIELDS = tuple(f.encode() for f in PAYLOAD_FIELDS[1:])


def payload_from_hash(h):
    """The raw payload of a task hash (HGETALL reply, bytes keys): ``p``, or its pieces joined."""
    raw = h.get(b"p")
    if raw is not None or b"1" not in h:
        return raw
    parts = []
    for name in _PIECE_FIELDS:
        part = h.get(name)
        if part is None:
            break
        parts.append(part)
    return b"".join(parts)


def decode_payload(raw, kind):
    """The payload as the producer gave it: bytes if it was bytes, else text; ``Sealed`` if it
    is encrypted."""
    if raw is None:
        return None
    if kind == b"e" or kind == "e":
        return Sealed(raw)
    if kind == b"b" or kind == "b":
        return raw
    return raw.decode("utf-8", "surrogateescape")


def _result(raw, kind):
    """A kept result: ``Sealed`` if its task's payload is (an encrypted queue's result is sealed
    too; one kept in clear by an older worker reads as it is)."""
    return Sealed(raw) if raw and (kind == b"e" or kind == "e") and raw.startswith(MAGIC) else raw


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _int(value, default=None):
    return default if value in (None, b"") else int(float(value))


def _json(value):
    """A checkpoint as saved (JSON text), or None."""
    if value in (None, b""):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # never written so by the worker (or too deep); shown as the text it is
        return _text(value)


def _float(value, default=None):
    return default if value in (None, b"") else float(value)


#: A progress message and a log line are cut at these lengths.
PROGRESS_MESSAGE_MAX = 500
LOG_LINE_MAX = 2000


@dataclass
class Task:
    """A task as read from Redis or handed to a handler.

    Handlers read ``id``, ``queue``, ``payload``, ``attempt`` and ``cancelled``; the other
    attributes describe the task for dashboards and APIs.
    """

    id: str
    queue: str
    payload: object = None
    state: str = "active"
    attempt: int = 0
    lease: int = 0
    retries: int | None = None
    timeout: float | None = None
    backoff: float | None = None
    worker: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    due_at: datetime | None = None
    failed_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    traceback: str | None = None
    lock: str | None = None
    unique_key: str | None = None
    callback: str | None = None
    meta: str | None = None
    result: bytes | None = None
    cancel_requested: bool = False
    #: The enqueue's trace context (``tc``), from which the worker's run span continues.
    trace_context: str | None = None
    #: Tags (``enqueue(..., tags=[...])``), indexed per queue.
    tags: list | None = None
    #: The last progress the handler reported (0 to 1), and its message.
    progress_value: float | None = None
    progress_message: str | None = None
    #: The batch the task belongs to, or is the callback of (``bt`` / ``bc``).
    batch_id: str | None = None
    #: The task controls it was enqueued with (``controls``): expiry, throttle and debounce keys.
    expires_at: datetime | None = None
    throttle_key: str | None = None
    debounce_key: str | None = None
    #: A generator handler's last saved checkpoint (None before the first), when it was saved,
    #: and how many runs of it began (``worker/checkpoints.py``).
    checkpoint: object = None
    checkpoint_saved_at: datetime | None = None
    runs: int = 0
    #: Set by the worker (from its event loop thread) when the task is cancelled or times out.
    _cancelled: bool = False
    #: Where ``progress`` and ``log`` go: set by the worker on the tasks it runs (None elsewhere).
    _sink: Any = field(default=None, repr=False, compare=False)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_sink", None)  # a worker's sink stays in its process (a handler process has its own)
        return state

    def progress(self, fraction: float, message: str = "") -> None:
        """Report how far the handler is: ``fraction`` from 0 to 1, and a short message (shown
        live on the dashboard and in the HTTP API's task). Cheap: sent in batches."""
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise InvalidInput(f"progress must be a number from 0 to 1, not {fraction!r}")
        if not isinstance(message, str):
            raise InvalidInput(f"the progress message must be a string, not {message!r}")
        self.progress_value, self.progress_message = float(fraction), message[:PROGRESS_MESSAGE_MAX]
        if self._sink is not None:
            self._sink.put(self, fraction=self.progress_value, message=self.progress_message)

    def log(self, line: str) -> None:
        """Append a line to the task's log (a text with newlines makes several lines; each is cut
        at 2,000 characters). The last 1,000 lines are kept while the task lives."""
        if not isinstance(line, str):
            raise InvalidInput(f"a log line must be a string, not {line!r}")
        lines = [part[:LOG_LINE_MAX] for part in (line.splitlines() or [""])]
        if self._sink is not None:
            self._sink.put(self, lines=lines)

    @property
    def cancelled(self) -> bool:
        """True once the task was cancelled (or timed out) while running: stop, its outcome is discarded."""
        return self._cancelled

    # -- the worker's side (not for handlers) ----------------------------------------------

    def set_cancelled(self):
        """Make ``cancelled`` true: the worker's (or a handler process's) doing when the task is
        cancelled or times out while it runs."""
        self._cancelled = True

    def begin_run(self, checkpoint, runs):
        """A generator handler's run begins from ``checkpoint`` (the worker's doing)."""
        self.checkpoint, self.runs = checkpoint, runs

    def attach_sink(self, sink):
        """Send this task's ``progress`` and ``log`` to ``sink`` (its ``put``): the worker's doing
        on the tasks it runs (a handler process attaches its own)."""
        self._sink = sink

    def pass_report(self, **report):
        """Pass a report made elsewhere (in a handler process) on to this task's sink, if any."""
        if self._sink is not None:
            self._sink.put(self, **report)

    @classmethod
    def from_hash(cls, task_id, queue, h):
        """Build from an HGETALL reply (bytes keys), or None if the hash is empty."""
        if not h:
            return None
        g = h.get
        return cls(
            id=task_id,
            queue=queue,
            payload=decode_payload(payload_from_hash(h), g(b"y")),
            state=_text(g(b"s")) or "pending",
            attempt=_int(g(b"a"), 0),
            lease=_int(g(b"l"), 0),
            retries=_int(g(b"r")),
            timeout=_float(g(b"t")),
            backoff=_float(g(b"b")),
            worker=_text(g(b"w")),
            created_at=ms_to_datetime(g(b"c")),
            started_at=ms_to_datetime(g(b"st")),
            due_at=ms_to_datetime(g(b"due")),
            failed_at=ms_to_datetime(g(b"fa")),
            finished_at=ms_to_datetime(g(b"fin")),
            error=_text(g(b"e")),
            traceback=_text(g(b"tb")),
            lock=_text(g(b"lk")),
            unique_key=_text(g(b"u")),
            callback=_text(g(b"cb")),
            meta=_text(g(b"m")),
            result=_result(g(b"res"), g(b"y")),
            cancel_requested=g(b"x") is not None,
            trace_context=_text(g(b"tc")),
            tags=_text(g(b"tg")).split("\n") if g(b"tg") else [],
            progress_value=_float(g(b"pg")),
            progress_message=_text(g(b"pm")),
            batch_id=_text(g(b"bt") or g(b"bc")),
            expires_at=ms_to_datetime(g(b"ex")),
            throttle_key=_text(g(b"th")),
            debounce_key=_text(g(b"db")),
            checkpoint=_json(g(b"ck")),
            checkpoint_saved_at=ms_to_datetime(g(b"ckt")),
            runs=_int(g(b"ckn"), 0),
        )

    @property
    def batch(self):
        """The batch this task belongs to (or, for a batch's callback, the batch it reports on),
        read now from Redis (``Batch.get``); None if it has none."""
        if not self.batch_id:
            return None
        return batchinfo.get(self.batch_id)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly description (payload as text, bytes shown with replacements)."""
        payload = self.payload
        if isinstance(payload, Sealed):
            payload = "encrypted"
        elif isinstance(payload, bytes):
            payload = payload.decode("utf-8", "replace")
        elif isinstance(payload, str):
            payload = payload.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        out = {"id": self.id, "queue": self.queue, "payload": payload, "state": self.state}
        for name in ("attempt", "retries", "timeout", "worker", "error", "lock", "callback"):
            out[name] = getattr(self, name)
        for name in ("created_at", "started_at", "due_at", "failed_at", "finished_at", "checkpoint_saved_at"):
            value = getattr(self, name)
            out[name] = value.isoformat() if value else None
        out["cancel_requested"] = self.cancel_requested
        out["tags"] = list(self.tags or [])
        out["checkpoint"], out["runs"] = self.checkpoint, self.runs
        out["progress"] = (
            None
            if self.progress_value is None
            else {"fraction": self.progress_value, "message": self.progress_message or ""}
        )
        return out
