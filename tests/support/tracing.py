"""OpenTelemetry spans, collected in this process (an in-memory exporter) and from worker
processes (a file each worker's SDK writes, tests/settings_tracing.py)."""

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from queues.engine import tracing


@pytest.fixture
def spans(monkeypatch):
    """worqr's spans in this process go to an SDK tracer with an in-memory exporter; the test's
    own spans (``spans.tracer``) too."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("worqr"))
    exporter.tracer = provider.get_tracer("tests")
    exporter.named = lambda name: [s for s in exporter.get_finished_spans() if s.name == name]
    yield exporter
    provider.shutdown()


@pytest.fixture
def traced(workers, tmp_path):
    """Start worker processes whose spans are written to a file: ``traced.spans()`` reads them."""
    path = tmp_path / "spans.jsonl"
    path.touch()

    def start(queues, env=None, **kwargs):
        env = {"WORQR_TEST_SPANS": str(path), **(env or {})}
        return workers(queues, settings="tests.settings_tracing", env=env, **kwargs)

    start.spans = lambda: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    start.named = lambda name: [s for s in start.spans() if s["name"] == name]
    return start
