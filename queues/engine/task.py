"""Task: what a handler receives and what ``Queue.get`` returns.

A task is one Redis hash, ``worqr:{<queue>}:task:<id>``, with short field names:

====  =======================================================  ====  ===========================
p     payload, raw (what the producer gave)                    s     state
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
tc    trace context: W3C traceparent (+ newline, tracestate)
np    parents not yet told (blocked)                       ob    'run': run even if a parent failed
bt    batch it belongs to                                  bc    batch it is a callback of
====  =======================================================  ====  ===========================

``tc`` is set at enqueue when OpenTelemetry is on and the enqueue's span has a valid context
(``tracing``); it is delivered with the task, so its runs continue the enqueue's trace.

States: pending, delayed, waiting (for a lock), blocked (waiting for parents, ``after=``),
active, failed, completed (only while a kept result lasts). Finished tasks are otherwise deleted.
"""

from dataclasses import dataclass
from datetime import UTC, datetime


def ms_to_datetime(ms):
    if ms in (None, b"", ""):
        return None
    return datetime.fromtimestamp(int(float(ms)) / 1000, tz=UTC)


def decode_payload(raw, kind):
    """The payload as the producer gave it: bytes if it was bytes, else text."""
    if raw is None:
        return None
    if kind == b"b" or kind == "b":
        return raw
    return raw.decode("utf-8", "surrogateescape")


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _int(value, default=None):
    return default if value in (None, b"") else int(float(value))


def _float(value, default=None):
    return default if value in (None, b"") else float(value)


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
    #: The batch the task belongs to, or is the callback of (``bt`` / ``bc``).
    batch_id: str | None = None
    #: Set by the worker (from its event loop thread) when the task is cancelled or times out.
    _cancelled: bool = False

    @property
    def cancelled(self):
        """True once the task was cancelled (or timed out) while running: stop, its outcome is discarded."""
        return self._cancelled

    @classmethod
    def from_hash(cls, task_id, queue, h):
        """Build from an HGETALL reply (bytes keys), or None if the hash is empty."""
        if not h:
            return None
        g = h.get
        return cls(
            id=task_id,
            queue=queue,
            payload=decode_payload(g(b"p"), g(b"y")),
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
            result=g(b"res"),
            cancel_requested=g(b"x") is not None,
            trace_context=_text(g(b"tc")),
            batch_id=_text(g(b"bt") or g(b"bc")),
        )

    @property
    def batch(self):
        """The batch this task belongs to (or, for a batch's callback, the batch it reports on),
        read now from Redis (``Batch.get``); None if it has none."""
        if not self.batch_id:
            return None
        from .batches import Batch

        return Batch.get(self.batch_id)

    def as_dict(self):
        """A JSON-friendly description (payload as text, bytes shown with replacements)."""
        payload = self.payload
        if isinstance(payload, bytes):
            payload = payload.decode("utf-8", "replace")
        elif isinstance(payload, str):
            payload = payload.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        out = {"id": self.id, "queue": self.queue, "payload": payload, "state": self.state}
        for name in ("attempt", "retries", "timeout", "worker", "error", "lock", "callback"):
            out[name] = getattr(self, name)
        for name in ("created_at", "started_at", "due_at", "failed_at", "finished_at"):
            value = getattr(self, name)
            out[name] = value.isoformat() if value else None
        out["cancel_requested"] = self.cancel_requested
        return out
