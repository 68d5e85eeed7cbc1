"""OpenTelemetry traces: the spans worqr makes, with the OpenTelemetry API only.

worqr is an instrumented library: it never sets up an SDK, a sampler or an exporter (the
application does, as for any instrumentation), so with the API alone every span is a no-op.
Spans are made when ``opentelemetry-api`` is importable and ``Config.opentelemetry`` is true
(``WORQR["OPENTELEMETRY"]``, default true); otherwise none of this runs and callers skip it.

1. ``enqueue_span``: ``worqr enqueue <queue>`` (PRODUCER) around one enqueue call (one span for
   ``enqueue_many``, with the count), on the caller's current context. Its context, as a W3C
   ``traceparent`` (and ``tracestate``), is stored with the tasks (task hash field ``tc``) and
   delivered with them: payloads stay raw.
2. ``start_run``: ``worqr run <queue>`` (CONSUMER) around one attempt in the worker, a child of
   the stored context, so the trace goes on across processes; each retry is a new run span in
   the same trace. ``bind`` runs the handler with that span as its current span (an isolated
   handler's process gets it ``carried`` and makes it current); ``end_run``
   sets the outcome (and, for a failed attempt, the exception and the error status) and ends it.
3. ``client_span``: a CLIENT span around a webhook's HTTP request, with the W3C headers
   injected into the request (by the application's propagators, W3C by default).
4. ``expired_span``: ``worqr expire <queue>`` (CONSUMER), a child of the enqueue's span, for a
   task that expired before it started (``expired``), recorded when its end is told.
5. Links to the run that caused a task: a worker that ends a task passes its run span's
   ``traceparent`` (``traceparent``) to the script that ends it, which records it with the end
   (``links:<id>`` field ``rt``) only when the task has children or a batch. A child released by
   that end gets it appended to its stored context (below), so its run span links to its
   parents' runs; a batch keeps its last ended task's (``rt``), and its callbacks' enqueue span
   links to it.

The stored context is text: the ``traceparent``, then ``tracestate`` after a newline if any,
then, each after a newline (the ``tracestate`` line empty if there is none), the traceparents of
the runs the task's run span links to.

Attributes follow the messaging semantic conventions: ``messaging.system`` ("worqr"),
``messaging.destination.name`` (the queue), ``messaging.message.id`` (the task id),
``messaging.operation.type`` (send / process), plus ``worqr.attempt`` and ``worqr.outcome``.
"""

import json
import time
from contextlib import contextmanager, nullcontext

from . import connection

try:
    from opentelemetry import context as _context
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # not installed: AVAILABLE is False and no function below is called
    _trace = None

#: Whether the OpenTelemetry API is importable.
AVAILABLE = _trace is not None
SYSTEM = "worqr"
#: Outcomes of an attempt that are errors (the others: completed, cancelled, deferred, stopped).
ERROR_OUTCOMES = frozenset({"failed", "error"})

_tracer = None
_w3c = TraceContextTextMapPropagator() if AVAILABLE else None


def enabled(config=None):
    """Whether to make spans: the API is importable and ``config.opentelemetry`` is true (without
    ``config``, the default connection's; true when there is none yet)."""
    if not AVAILABLE:
        return False
    if config is None:
        config = getattr(connection._default, "config", None)
    return config is None or config.opentelemetry


def tracer():
    global _tracer
    if _tracer is None:
        _tracer = _trace.get_tracer("worqr")
    return _tracer


# -- the trace context stored with a task ------------------------------------------------------


def _encode(carrier):
    """``traceparent``, then ``tracestate`` after a newline if any ('' when there is no context)."""
    parent = carrier.get("traceparent", "")
    state = carrier.get("tracestate", "")
    return f"{parent}\n{state}" if parent and state else parent


def _decode(text):
    """The OpenTelemetry Context a stored trace context describes (an empty one for '')."""
    if not text:
        return _context.Context()
    parent, _, rest = text.partition("\n")
    state = rest.partition("\n")[0]
    carrier = {"traceparent": parent, "tracestate": state} if state else {"traceparent": parent}
    return _w3c.extract(carrier, context=_context.Context())


def _links(text):
    """OpenTelemetry Links to the spans a stored trace context's link lines name (its lines after
    the second), or to the traceparents of a list."""
    if not text:
        return None
    if isinstance(text, str):
        text = text.split("\n")[2:]
    out = []
    for parent in text:
        if parent:
            sc = _trace.get_current_span(_w3c.extract({"traceparent": parent}, context=_context.Context()))
            sc = sc.get_span_context()
            if sc.is_valid:
                out.append(Link(sc))
    return out or None


def traceparent(span):
    """``span``'s W3C traceparent ('' when it has no valid context): what a worker passes to the
    script that ends a task, for the spans that task's end causes to link to."""
    sc = span.get_span_context()
    if not sc.is_valid:
        return ""
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


def current():
    """The caller's current context, to enqueue in later (at a transaction's commit)."""
    return _context.get_current() if enabled() else None


def attached(ctx):
    """A context manager making ``ctx`` (from ``current``) the current context; a no-op for None."""
    if ctx is None:
        return nullcontext()
    return _Attached(ctx)


class _Attached:
    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        self.token = _context.attach(self.ctx)

    def __exit__(self, *exc):
        _context.detach(self.token)


# -- enqueue -----------------------------------------------------------------------------------


class enqueue_span:  # noqa: N801  (used as a function: ``with tracing.enqueue_span(...) as (span, trace)``)
    """The PRODUCER span of one enqueue call of ``count`` tasks, current inside the block; an
    exception leaving the block is recorded on it. ``as`` gives (span, the trace context to store
    with the tasks: '' when there is none, e.g. a no-op tracer with no parent). ``links``: the
    traceparents of the runs that caused it (a batch's callbacks). A class, not a generator: this
    runs on every enqueue."""

    __slots__ = ("span", "token")

    def __init__(self, queue, count, schedule=None, links=None):
        attributes = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": queue,
            "messaging.operation.type": "send",
            "messaging.operation.name": "enqueue",
        }
        if count != 1:
            attributes["messaging.batch.message_count"] = count
        if schedule is not None:
            attributes["worqr.schedule"] = schedule
        self.span = tracer().start_span(
            f"worqr enqueue {queue}", kind=SpanKind.PRODUCER, attributes=attributes, links=_links(links)
        )
        self.token = None

    def __enter__(self):
        span = self.span
        if not span.get_span_context().is_valid:
            return span, ""
        self.token = _context.attach(_trace.set_span_in_context(span))
        carrier = {}
        _w3c.inject(carrier)
        return span, _encode(carrier)

    def __exit__(self, kind, exc, tb):
        if self.token is not None:
            _context.detach(self.token)
        if exc is not None and self.span.is_recording():
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{kind.__name__}: {exc}"))
        self.span.end()
        return False


def enqueued(span, ids):
    """Record the task id of a one-task enqueue (the id Redis answered: a unique key's holder)."""
    if len(ids) == 1 and span.is_recording():
        span.set_attribute("messaging.message.id", ids[0])


# -- a run in the worker -----------------------------------------------------------------------


#: How long (seconds) the answer about the global tracer provider is reused: asking costs a
#: lookup in os.environ, per task run, while an SDK is set up once, at start-up.
NO_SDK_REUSE = 1.0
_no_sdk_answer = (float("-inf"), False)  # (monotonic time it holds until, the answer)


def _no_sdk():
    """Whether worqr's tracer is the API's own and no tracer provider is set up (the API's proxy,
    or its no-op one): every span is then a no-op, and one without a stored context is the
    invalid span. A provider set up later is seen within ``NO_SDK_REUSE`` seconds."""
    global _no_sdk_answer
    if _tracer is not None and not isinstance(_tracer, (_trace.ProxyTracer, _trace.NoOpTracer)):
        return False  # a tracer given to worqr itself
    now = time.monotonic()
    until, answer = _no_sdk_answer
    if now < until:
        return answer
    answer = isinstance(_trace.get_tracer_provider(), (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider))
    _no_sdk_answer = (now + NO_SDK_REUSE, answer)
    return answer


def start_run(task, worker):
    """Start the CONSUMER span of one attempt of ``task``: a child of its enqueue's span, linked
    to the runs of the parents whose end released it (``after=``, a chain's step before). With no
    SDK set up and no stored context, the invalid span, without building a span that is one."""
    tc = task.trace_context
    if not tc and _no_sdk():
        return _trace.INVALID_SPAN
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": task.queue,
        "messaging.message.id": task.id,
        "messaging.operation.type": "process",
        "messaging.operation.name": "run",
        "worqr.attempt": task.attempt,
        "worqr.worker": worker,
    }
    if task.meta and task.meta.startswith('{"schedule"'):  # a schedule's run (its own trace, per tick)
        try:
            attributes["worqr.schedule"] = json.loads(task.meta)["schedule"]
        except (ValueError, KeyError, TypeError):
            pass
    return tracer().start_span(
        f"worqr run {task.queue}",
        context=_decode(tc),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=_links(tc) if tc and tc.count("\n") > 1 else None,
    )


def expired_span(queue, task_id, tc):
    """Record the span of a task that expired before it started (never run, no retry): a child of
    its enqueue's span (its stored context ``tc``), ``worqr.outcome`` = ``expired``."""
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.message.id": task_id,
        "messaging.operation.type": "settle",
        "messaging.operation.name": "expire",
        "worqr.outcome": "expired",
    }
    tracer().start_span(
        f"worqr expire {queue}", context=_decode(tc), kind=SpanKind.CONSUMER, attributes=attributes
    ).end()


def bind(span, func, is_async):
    """``func`` (a handler), run with ``span`` as the current span of the thread or asyncio task
    that runs it, so the handler's own spans (and a webhook's) are its children. ``func`` as it
    is when the span has no valid context (a no-op tracer and no stored context)."""
    if not span.get_span_context().is_valid:
        return func
    ctx = _trace.set_span_in_context(span, _context.Context())
    if is_async:

        async def run_async(task):
            token = _context.attach(ctx)
            try:
                return await func(task)
            finally:
                _context.detach(token)

        return run_async

    def run(task):
        token = _context.attach(ctx)
        try:
            return func(task)
        finally:
            _context.detach(token)

    return run


def carried(span):
    """``span``'s context as stored with tasks ('' when it has none): how a run span reaches an
    isolated handler's process, which makes it current with ``attached_carried``."""
    if not span.get_span_context().is_valid:
        return ""
    carrier = {}
    _w3c.inject(carrier, context=_trace.set_span_in_context(span, _context.Context()))
    return _encode(carrier)


def attached_carried(text):
    """A context manager making the span ``carried`` described current ('': a no-op)."""
    return _Attached(_decode(text)) if text and AVAILABLE else nullcontext()


def end_run(span, outcome, error=None, exc=None):
    """End a run span with its outcome; a failed attempt records its exception (``exc``, or the
    error text when there is no exception object, e.g. a timeout) and sets the error status."""
    if span.is_recording():
        span.set_attribute("worqr.outcome", outcome)
        if outcome in ERROR_OUTCOMES:
            recorded = False
            if exc is not None:
                try:
                    span.record_exception(exc)
                    recorded = True
                except Exception:  # its str() raised: the error text (worker.contained.describe) instead
                    pass
            if not recorded and error:
                kind, _, message = error.partition(": ")
                span.add_event("exception", {"exception.type": kind, "exception.message": message or kind})
            span.set_status(Status(StatusCode.ERROR, error or outcome))
    span.end()


def ids(span):
    """(trace id, span id) as hex, or None when the span has no valid context."""
    sc = span.get_span_context()
    if not sc.is_valid:
        return None
    return f"{sc.trace_id:032x}", f"{sc.span_id:016x}"


def current_ids():
    """(trace id, span id) of the current span, or None (for log lines written inside a span)."""
    if not AVAILABLE:
        return None
    return ids(_trace.get_current_span())


# -- webhooks ----------------------------------------------------------------------------------


def _no_status(status):
    pass


@contextmanager
def client_span(method, url, host, port, headers):
    """A CLIENT span around one outgoing HTTP request (current inside the block), with the
    propagators' headers (W3C ``traceparent``, ``tracestate``) added to ``headers``. Yields a
    function to call with the response's status code."""
    attributes = {"http.request.method": method, "url.full": url, "server.address": host, "server.port": port}
    with tracer().start_as_current_span(method, kind=SpanKind.CLIENT, attributes=attributes) as span:
        _propagate.inject(headers)

        def status(code):
            span.set_attribute("http.response.status_code", code)
            if code >= 400:
                span.set_status(Status(StatusCode.ERROR, f"HTTP {code}"))

        yield status


@contextmanager
def no_span():
    yield _no_status
