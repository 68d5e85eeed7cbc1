"""Test settings for worker processes with OpenTelemetry's SDK: every span the process ends is
written at once, as one JSON line, to ``$WORQR_TEST_SPANS`` (what an application does with its
own exporter). ``$WORQR_TEST_OPENTELEMETRY=0`` sets ``WORQR["OPENTELEMETRY"] = False``;
``$WORQR_TEST_LOG_FORMAT`` sets ``WORQR["LOG_FORMAT"]``."""

import os

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from tests.settings import *  # noqa: F403

_spans = open(os.environ["WORQR_TEST_SPANS"], "a", buffering=1)  # noqa: SIM115  (open for the process's life)
_provider = TracerProvider()
_provider.add_span_processor(
    SimpleSpanProcessor(ConsoleSpanExporter(out=_spans, formatter=lambda span: span.to_json(indent=None) + "\n"))
)
trace.set_tracer_provider(_provider)

if os.environ.get("WORQR_TEST_OPENTELEMETRY") == "0":
    WORQR = dict(WORQR, OPENTELEMETRY=False)  # noqa: F405
if os.environ.get("WORQR_TEST_LOG_FORMAT"):
    WORQR = dict(WORQR, LOG_FORMAT=os.environ["WORQR_TEST_LOG_FORMAT"])  # noqa: F405
