"""OpenTelemetry traces end to end and the worker's JSON logs: enqueues in this process (the SDK
with an in-memory exporter), runs in real worker processes (the SDK exporting each span to a
file, tests/settings_tracing.py), webhooks to a real local HTTP server."""

import json
import logging
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.db import transaction
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from queues import Queue, schedules
from queues.checks import check_worqr_settings
from queues.engine import Batch, Connection, Task, chain, commands, keys, tracing
from queues.engine.worker.logs import JsonFormatter
from tests.conftest import ROOT, wait_for
from tests.support.api import Api, make_token
from tests.support.webhooks import WEBHOOK_ENV, Receiver
from tests.tasksapp import tasks as framework_tasks

MESSAGING = {"messaging.system": "worqr", "messaging.operation.type": "process"}


def hex_id(value, digits):
    return f"0x{value:0{digits}x}"


def ids_of(span):
    """(trace id, span id) of an in-process span, as the file exporter writes them."""
    return hex_id(span.context.trace_id, 32), hex_id(span.context.span_id, 16)


def parent_of(traceparent):
    """(trace id, parent span id) of a W3C traceparent, as the file exporter writes them."""
    version, trace_id, span_id, flags = traceparent.split("-")
    assert version == "00" and int(flags, 16) & 1, traceparent  # sampled
    return f"0x{trace_id}", f"0x{span_id}"


def stored_parent(client, queue, task_id):
    """(trace id, parent span id) of the trace context stored with a task."""
    return parent_of(client.hget(keys.task_key(queue, task_id), "tc").decode())


def done(queue, n=1):
    wait_for(lambda: Queue(queue).counts()["completed"] >= n, timeout=20, message=f"{n} task(s) of {queue} done")


def test_an_enqueue_and_its_run_in_a_worker_are_one_trace(spans, traced):
    """An enqueue inside a parent span is a PRODUCER child of it."""
    # the worker's run span is a CONSUMER child of the enqueue span, in the same trace, with the messaging attributes.
    with spans.tracer.start_as_current_span("request") as request:
        task_id = Queue("t1").enqueue("hello")
    (enqueue,) = spans.named("worqr enqueue t1")
    assert enqueue.kind == SpanKind.PRODUCER and enqueue.parent.span_id == request.context.span_id
    assert enqueue.context.trace_id == request.context.trace_id
    assert dict(enqueue.attributes) == {
        "messaging.system": "worqr",
        "messaging.destination.name": "t1",
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
        "messaging.message.id": task_id,
    }
    trace_id, enqueue_id = ids_of(enqueue)
    client = Queue("t1").client
    assert stored_parent(client, "t1", task_id) == (trace_id, enqueue_id)
    assert client.hget(keys.task_key("t1", task_id), "p") == b"hello"  # the payload stays raw

    traced(["t1"], name="tracer-1")
    (run,) = wait_for(lambda: traced.named("worqr run t1"), timeout=20, message="the run span")
    assert run["context"]["trace_id"] == trace_id and run["parent_id"] == enqueue_id
    assert run["kind"] == "SpanKind.CONSUMER" and run["status"]["status_code"] == "UNSET"
    attributes = run["attributes"]
    assert {k: attributes[k] for k in MESSAGING} == MESSAGING
    assert attributes["messaging.destination.name"] == "t1" and attributes["messaging.message.id"] == task_id
    assert (attributes["worqr.attempt"], attributes["worqr.outcome"]) == (1, "completed")
    assert attributes["worqr.worker"] == "tracer-1"


def test_a_failed_attempt_is_an_error_span_and_its_retry_a_new_run_in_the_same_trace(spans, traced):
    """The failing attempt's span has error status and the exception event."""
    # the retry is a second run span, child of the same enqueue span.
    with spans.tracer.start_as_current_span("request"):
        Queue("retries").enqueue(json.dumps({"fail": 1}))
    (enqueue,) = spans.named("worqr enqueue retries")
    traced(["retries"])
    runs = wait_for(
        lambda: len(traced.named("worqr run retries")) == 2 and traced.named("worqr run retries"),
        timeout=20,
        message="two run spans",
    )
    first, second = sorted(runs, key=lambda s: s["attributes"]["worqr.attempt"])
    trace_id, enqueue_id = ids_of(enqueue)
    for run in (first, second):
        assert run["context"]["trace_id"] == trace_id and run["parent_id"] == enqueue_id
    assert first["context"]["span_id"] != second["context"]["span_id"]
    assert (first["attributes"]["worqr.attempt"], first["attributes"]["worqr.outcome"]) == (1, "failed")
    assert first["status"] == {"status_code": "ERROR", "description": "ValueError: asked to fail on attempt 1"}
    (event,) = first["events"]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.type"] == "ValueError"
    assert event["attributes"]["exception.message"] == "asked to fail on attempt 1"
    assert "Traceback" in event["attributes"]["exception.stacktrace"]
    assert (second["attributes"]["worqr.attempt"], second["attributes"]["worqr.outcome"]) == (2, "completed")
    assert second["status"]["status_code"] == "UNSET" and not second["events"]


def test_a_timed_out_attempt_is_an_error_span_and_a_task_without_context_starts_a_trace(traced, redis_server):
    """A run past its timeout ends its span as a failed attempt, with a TaskTimeout event."""
    # a task enqueued with no trace context (tracing off in the producer) gets a root run span.
    untraced = Connection(redis_server.url, Queue("timeouts").connection.config.with_(opentelemetry=False))
    Queue("timeouts", untraced).enqueue(json.dumps({"sleep": 5}), retries=0)
    traced(["timeouts"])
    (run,) = wait_for(lambda: traced.named("worqr run timeouts"), timeout=20, message="the run span")
    assert run["attributes"]["worqr.outcome"] == "failed" and run["status"]["status_code"] == "ERROR"
    assert run["status"]["description"] == "TaskTimeout: ran longer than its timeout of 1 s"
    assert run["events"][0]["attributes"]["exception.type"] == "TaskTimeout"
    assert run["parent_id"] is None


def test_enqueue_many_is_one_span_with_the_count(spans, client):
    """enqueue_many makes one PRODUCER span with the batch's size; every task carries its context."""
    ids = Queue("t2").enqueue_many(["a", "b", "c"])
    (span,) = spans.named("worqr enqueue t2")
    assert span.attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in span.attributes
    for task_id in ids:
        assert stored_parent(client, "t2", task_id) == ids_of(span)


def test_a_failed_enqueue_is_an_error_span(spans):
    """An enqueue that Redis refuses (here: a server that is not there) records the error."""
    q = Queue("t3", Connection("redis://127.0.0.1:1/0"))
    with pytest.raises(Exception):  # noqa: B017  (redis-py's connection error)
        q.enqueue("x")
    (span,) = spans.named("worqr enqueue t3")
    assert span.status.status_code == StatusCode.ERROR and span.events[0].name == "exception"


@pytest.mark.django_db
@pytest.mark.usefixtures("hooks")
def test_api_enqueue_and_webhook_carry_the_request_trace(spans, traced):
    """An API call made inside a request span enqueues as its child."""
    # the worker's delivery is a CLIENT span, child of the run span, whose W3C traceparent the receiver gets.
    receiver = Receiver()
    try:
        api = Api(make_token("all", name="tracing"))
        with spans.tracer.start_as_current_span("request") as request:
            url = receiver.url("/hook?key=s3cret")
            r = api.post("/api/tasks", {"queue": "hooks", "payload": "hi", "callback": url})
        assert r.status_code == 201, r.content
        (enqueue,) = spans.named("worqr enqueue hooks")
        assert enqueue.parent.span_id == request.context.span_id
        traced(["hooks"], env=WEBHOOK_ENV)
        got = receiver.wait("/hook?key=s3cret", 1)[0]
    finally:
        receiver.close()
    (post,) = wait_for(lambda: traced.named("POST"), timeout=20, message="the delivery's span")
    # the delivery is the run's child: the run span ends (and is written) after it
    (run,) = wait_for(lambda: traced.named("worqr run hooks"), timeout=20, message="the run span")
    trace_id, enqueue_id = ids_of(enqueue)
    assert parent_of(got["headers"]["traceparent"]) == (trace_id, post["context"]["span_id"])
    assert post["kind"] == "SpanKind.CLIENT" and post["parent_id"] == run["context"]["span_id"]
    assert run["parent_id"] == enqueue_id and post["context"]["trace_id"] == trace_id
    assert post["attributes"]["http.response.status_code"] == 200
    assert post["attributes"]["url.full"] == receiver.url("/hook")  # without the query, which may hold a secret


def test_the_tracestate_goes_with_the_task_to_its_run_and_its_webhook(spans, traced, client, hooks):
    """An enqueue in a context with a tracestate stores it; the run span and the webhook carry it."""
    # The parent context as a web framework's instrumentation extracts it from a request's headers.
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    ctx = TraceContextTextMapPropagator().extract({"traceparent": parent, "tracestate": "vendor=abc,other=1"})
    receiver = Receiver()
    try:
        token = otel_context.attach(ctx)
        try:
            task_id = Queue("hooks").enqueue("hi", callback=receiver.url("/traced"))
        finally:
            otel_context.detach(token)
        (enqueue,) = spans.named("worqr enqueue hooks")
        assert enqueue.parent.span_id == 0x00F067AA0BA902B7 and enqueue.context.trace_id == int(parent[3:35], 16)
        stored = client.hget(keys.task_key("hooks", task_id), "tc").decode()
        trace_id, enqueue_id = ids_of(enqueue)
        assert stored == f"00-{trace_id[2:]}-{enqueue_id[2:]}-01\nvendor=abc,other=1"
        traced(["hooks"], env=WEBHOOK_ENV)
        got = receiver.wait("/traced", 1)[0]
    finally:
        receiver.close()
    assert got["headers"].get("tracestate") == "vendor=abc,other=1"
    (run,) = wait_for(lambda: traced.named("worqr run hooks"), timeout=20, message="the run span")
    assert run["parent_id"] == enqueue_id and run["context"]["trace_id"] == trace_id
    assert run["context"]["trace_state"] == "['{key=vendor, value=abc}', '{key=other, value=1}']"


def linked_span_ids(span):
    """The span ids a span (as the file exporter writes it) links to."""
    return [link["context"]["span_id"] for link in span["links"]]


def test_a_chain_step_s_run_links_to_the_run_of_the_step_before(spans, traced):
    """Step 2's run span is a child of its own enqueue span and links to step 1's run span."""
    first_id, second_id = chain([("t1", "one"), ("t2", json.dumps({"fail": 1}), {"retries": 1, "backoff": 0.1})])
    enqueue_1, enqueue_2 = spans.named("worqr enqueue t1") + spans.named("worqr enqueue t2")
    traced(["t1", "t2"])
    # step 2 fails once: its retry was released by nothing, yet links to step 1's run too
    runs = wait_for(lambda: len(traced.named("worqr run t2")) == 2 and traced.named("worqr run t2"), timeout=20)
    (first,) = traced.named("worqr run t1")
    assert first["attributes"]["messaging.message.id"] == first_id and first["parent_id"] == ids_of(enqueue_1)[1]
    assert not first["links"]
    for run in runs:
        assert run["attributes"]["messaging.message.id"] == second_id
        assert run["parent_id"] == ids_of(enqueue_2)[1] and run["context"]["trace_id"] == ids_of(enqueue_2)[0]
        assert linked_span_ids(run) == [first["context"]["span_id"]]
        (link,) = run["links"]
        assert link["context"]["trace_id"] == first["context"]["trace_id"]


def test_a_batch_callback_s_enqueue_links_to_the_run_that_ended_the_batch(spans, traced, client):
    """The callbacks' enqueue span (made by the worker that ended the batch's last task, here a failure) links ..."""
    # ... to that task's run span; the callback's run is its child.
    b = Batch(on_complete=("t6", "complete"))
    ok_id = b.enqueue("t1", "ok")
    failing_id = b.enqueue("t1", json.dumps({"fail": "always"}), retries=0)
    b.close()
    traced(["t1", "t6"], concurrency=1)  # one at a time: the failing task ends last
    (callback_run,) = wait_for(lambda: traced.named("worqr run t6"), timeout=30, message="the callback's run")
    # the failing task's run span may end after the callback's run (its report took the callback)
    t1_runs = wait_for(lambda: len(traced.named("worqr run t1")) == 2 and traced.named("worqr run t1"), timeout=20)
    runs = {s["attributes"]["messaging.message.id"]: s for s in t1_runs}
    assert set(runs) == {ok_id, failing_id} and runs[failing_id]["attributes"]["worqr.outcome"] == "failed"
    # the callback may run (and its span be written) before its enqueue span ends
    (enqueue,) = wait_for(lambda: traced.named("worqr enqueue t6"), timeout=10, message="the callback's enqueue")
    assert linked_span_ids(enqueue) == [runs[failing_id]["context"]["span_id"]]
    assert enqueue["links"][0]["context"]["trace_id"] == runs[failing_id]["context"]["trace_id"]
    assert callback_run["parent_id"] == enqueue["context"]["span_id"]
    assert callback_run["context"]["trace_id"] == enqueue["context"]["trace_id"]
    assert Batch.get(b.id)["state"] == "finished_with_failures"


@pytest.mark.django_db(transaction=True)
def test_deferred_enqueues_are_traced_where_they_were_called(spans):
    """Queue.enqueue(on_commit=True) and the Tasks backend inside a transaction enqueue at the commit, in the ..."""
    # ... span that was current at the call.
    with transaction.atomic():
        with spans.tracer.start_as_current_span("view") as view:
            task_id = Queue("oc-trace").enqueue("x", on_commit=True)
            result = framework_tasks.add.enqueue(1, 2)
        assert not spans.named("worqr enqueue oc-trace")  # not yet: at the commit
    (plain,) = spans.named("worqr enqueue oc-trace")
    (backend,) = spans.named("worqr enqueue dt-default")
    assert plain.parent.span_id == view.context.span_id == backend.parent.span_id
    assert plain.attributes["messaging.message.id"] == task_id
    assert backend.attributes["messaging.message.id"] == result.id


def test_a_triggered_schedule_run_continues_the_trigger_trace(spans, client, settings):
    """schedules.trigger makes the run's enqueue span (with the schedule's name), child of the caller's span."""
    # the run carries its context.
    from queues.conf import schedule_specs
    from queues.engine import schedules as engine_schedules

    settings.WORQR = {**settings.WORQR, "SCHEDULES": {"nightly": {"queue": "sched", "every": 3600}}}
    engine_schedules.sync(client, schedule_specs())
    with spans.tracer.start_as_current_span("click") as click:
        task_id = schedules.trigger("nightly")
    (enqueue,) = spans.named("worqr enqueue sched")
    assert enqueue.parent.span_id == click.context.span_id
    assert enqueue.attributes["worqr.schedule"] == "nightly"
    assert stored_parent(client, "sched", task_id) == ids_of(enqueue)


def test_with_opentelemetry_off_no_span_is_made_and_json_logs_have_no_trace(spans, traced, redis_server, client):
    """WORQR["OPENTELEMETRY"] = False."""
    # no enqueue span, no context stored, no run span; the worker's JSON lines (WORQR["LOG_FORMAT"]) have the task's
    # fields and no trace ids.
    config = Queue("t4").connection.config.with_(opentelemetry=False)
    q = Queue("t4", Connection(redis_server.url, config))
    with spans.tracer.start_as_current_span("request"):
        task_id = q.enqueue("quiet")
    assert [s.name for s in spans.get_finished_spans()] == ["request"]
    assert client.hget(keys.task_key("t4", task_id), "tc") is None
    worker = traced(["t4"], env={"WORQR_TEST_OPENTELEMETRY": "0", "WORQR_TEST_LOG_FORMAT": "json"})
    done("t4")
    line = wait_for(lambda: [x for x in _json_lines(worker) if x.get("task_id") == task_id], message="the log line")[0]
    assert line["outcome"] == "completed" and "trace_id" not in line and "span_id" not in line
    assert traced.spans() == []


def _json_lines(worker):
    return [json.loads(line) for line in worker.output().splitlines() if line.strip()]


def test_json_log_lines_carry_the_task_and_its_trace(spans, traced):
    """--log-format json: every line is one JSON object."""
    # a task's line has time, level, worker, queue, task id, attempt, outcome, duration and the run span's trace and
    # span ids.
    Queue("t5").enqueue(json.dumps({"fail": 1}), retries=1, backoff=0.1)
    worker = traced(["t5"], options=["--log-format", "json"], name="json-logger")
    runs = wait_for(
        lambda: len(traced.named("worqr run t5")) == 2 and traced.named("worqr run t5"),
        timeout=20,
        message="two run spans",
    )
    lines = _json_lines(worker)  # every line parses
    assert lines and all({"time", "level", "logger", "message", "worker"} <= set(x) for x in lines)
    assert all(x["worker"] == "json-logger" for x in lines)
    outcomes = sorted((x for x in lines if "task_id" in x), key=lambda x: x["attempt"])
    assert [(x["attempt"], x["outcome"], x["level"]) for x in outcomes] == [
        (1, "failed", "WARNING"),  # a failed attempt that runs again: WARNING, with its retry_in
        (2, "completed", "INFO"),
    ]
    assert outcomes[0]["retry_in"] == 0.1 and "retry_in" not in outcomes[1]
    spans_by_attempt = {s["attributes"]["worqr.attempt"]: s for s in runs}
    assert outcomes[0]["error"] == "ValueError: asked to fail on attempt 1" and "error" not in outcomes[1]
    for x in outcomes:
        assert x["queue"] == "t5" and isinstance(x["duration_ms"], float)
        assert x["time"].endswith("Z") and x["time"][:2] == "20"
        span = spans_by_attempt[x["attempt"]]
        assert (f"0x{x['trace_id']}", f"0x{x['span_id']}") == (span["context"]["trace_id"], span["context"]["span_id"])


def test_log_format_and_opentelemetry_settings_are_checked(settings, monkeypatch):
    """A bad WORQR["LOG_FORMAT"] or WORQR["OPENTELEMETRY"] is a queues.E001 error at start-up."""
    # OPENTELEMETRY = True without the package a warning, queues.W001.
    settings.WORQR = {**settings.WORQR, "LOG_FORMAT": "xml"}
    (error,) = check_worqr_settings(None)
    assert error.id == "queues.E001" and "LOG_FORMAT" in error.msg and "'xml'" in error.msg
    settings.WORQR = {**settings.WORQR, "LOG_FORMAT": "json", "OPENTELEMETRY": "yes"}
    (error,) = check_worqr_settings(None)
    assert error.id == "queues.E001" and "OPENTELEMETRY" in error.msg and "True or False" in error.msg
    settings.WORQR = {**settings.WORQR, "OPENTELEMETRY": False}
    assert check_worqr_settings(None) == []
    settings.WORQR = {**settings.WORQR, "OPENTELEMETRY": True}
    assert check_worqr_settings(None) == []
    monkeypatch.setattr(tracing, "AVAILABLE", False)  # asked for, but opentelemetry-api is missing
    (warning,) = check_worqr_settings(None)
    assert warning.id == "queues.W001" and "not installed" in warning.msg and "worqr[otel]" in warning.hint
    with pytest.raises(Exception, match="invalid choice: 'xml'"):
        call_command("worker", "t1", "--log-format", "xml")


def test_the_engine_runs_without_opentelemetry_installed(redis_server):
    """With opentelemetry not importable, enqueue and a worker's take work as before and store no trace context."""
    code = f"""
import sys
sys.modules["opentelemetry"] = None  # as if not installed
from queues.engine import Connection, Task, commands, keys, tracing
from queues.engine.worker.logs import JsonFormatter
from queues.engine.queue import Queue
assert not tracing.AVAILABLE and not tracing.enabled()
q = Queue("plain", Connection({redis_server.url!r}))
task_id = q.enqueue("x")
assert q.client.hget(keys.task_key("plain", task_id), "tc") is None
commands.register("plain", "w", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(q.client)
(task,) = commands.start("plain", "w", 1, lock_ttl=60, grace=1, default_timeout=0, result_ttl=0).run(q.client).tasks
assert task.id == task_id and task.trace_context is None, task
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_a_hand_over_from_an_older_enqueue_script_is_still_a_delivery():
    """During a rolling deploy an older producer's hand-over has 9 fields (no trace context)."""
    # the worker still runs it.
    fields = [b"t1-0000000000000000", b"p", b"3", b"1", b"0", b"", b"", b"", b""]
    task = commands.task_from_fields("t1", fields)
    assert (task.id, task.lease, task.attempt, task.payload, task.trace_context) == (
        fields[0].decode(),
        3,
        1,
        "p",
        None,
    )
    assert commands.task_from_fields("t1", [*fields, b"00-ab-cd-01"]).trace_context == "00-ab-cd-01"


def test_a_line_logged_inside_a_span_carries_its_ids(spans):
    """The JSON format gives a handler's own log lines the current span's trace and span ids."""
    record = logging.LogRecord("myapp", logging.WARNING, __file__, 1, "charged %s", ("card",), None)
    with spans.tracer.start_as_current_span("worqr run t1") as span:
        line = json.loads(JsonFormatter("w1").format(record))
    assert line["message"] == "charged card" and line["worker"] == "w1" and line["level"] == "WARNING"
    assert (line["trace_id"], line["span_id"]) == (f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}")
    assert "trace_id" not in json.loads(JsonFormatter("w1").format(record))  # outside any span


def test_a_schedule_run_span_names_its_schedule(spans):
    """A run whose meta says it is a schedule's has the schedule's name as worqr.schedule."""
    meta = '{"schedule": "ping", "tick": 1767225600000, "kind": "tick"}'
    tracing.end_run(tracing.start_run(Task(id="sched-1", queue="sched", attempt=1, meta=meta), "w1"), "completed")
    tracing.end_run(tracing.start_run(Task(id="t1-1", queue="t1", attempt=1, meta="{}"), "w1"), "completed")
    scheduled, plain = spans.get_finished_spans()
    assert scheduled.attributes["worqr.schedule"] == "ping" and scheduled.parent is None
    assert "worqr.schedule" not in plain.attributes


def test_a_failed_run_whose_exception_has_no_text_still_ends_its_span_with_the_error(spans):
    """end_run with an exception whose str() raises: the span ends, status ERROR, the error text as its exception event."""

    class Unprintable(Exception):
        def __str__(self):
            raise ValueError("no text")

    span = tracing.start_run(Task(id="t1-2", queue="t1", attempt=1, meta="{}"), "w1")
    tracing.end_run(span, "failed", "Unprintable: <str() of it raised>", Unprintable())
    (ended,) = spans.get_finished_spans()
    assert ended.status.status_code == StatusCode.ERROR
    (event,) = [e for e in ended.events if e.name == "exception"]
    assert event.attributes["exception.type"] == "Unprintable"


def test_a_task_that_expires_before_it_starts_records_an_expired_span_and_no_run(spans, traced):
    """A traced task past its expires= when taken: a 'worqr expire' span, child of its enqueue, outcome expired; no run span."""
    import time

    q = Queue("t1")
    q.pause()
    with spans.tracer.start_as_current_span("request"):
        task_id = q.enqueue("late", expires=0.3)
    (enqueue,) = spans.named("worqr enqueue t1")
    time.sleep(0.6)
    q.resume()
    traced(["t1"])
    (span,) = wait_for(lambda: traced.named("worqr expire t1"), timeout=20, message="the expired span")
    trace_id, enqueue_id = ids_of(enqueue)
    assert span["context"]["trace_id"] == trace_id and span["parent_id"] == enqueue_id
    assert span["attributes"]["worqr.outcome"] == "expired" and span["attributes"]["messaging.message.id"] == task_id
    assert span["status"]["status_code"] == "UNSET" and "worqr.attempt" not in span["attributes"]
    q.enqueue("after")  # a task enqueued after it runs: by then the expired one would have run too
    wait_for(lambda: traced.named("worqr run t1"), timeout=20, message="the next task's run")
    assert all(r["attributes"]["messaging.message.id"] != task_id for r in traced.named("worqr run t1"))
    assert q.counts()["expired"] == 1


def test_without_an_sdk_a_run_with_no_stored_context_makes_no_span_and_one_with_a_context_keeps_it():
    """API alone: no context runs under the invalid span, a stored one under it; with an SDK each run is a span."""
    code = """
import time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from queues.engine import Task, tracing
plain = Task(id="t1", queue="q", attempt=1)
parent = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
carried = Task(id="t2", queue="q", attempt=1, trace_context=parent)
assert tracing.start_run(plain, "w") is trace.INVALID_SPAN
span = tracing.start_run(carried, "w")
assert not span.is_recording() and tracing.traceparent(span) == parent, span
trace.set_tracer_provider(TracerProvider())
time.sleep(tracing.NO_SDK_REUSE)  # a provider set up later is seen once the answer is that old
span = tracing.start_run(plain, "w")
assert span.is_recording() and tracing.traceparent(span) != "", span
tracing.end_run(span, "completed")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
