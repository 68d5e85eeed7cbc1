"""Django settings for bench/tracing.py's workers: bench.worqr_settings in one of the tracing modes
of ``$WORQR_BENCH_TRACING``:

- ``off``: opentelemetry is not importable (as if not installed);
- ``disabled``: installed, ``WORQR["OPENTELEMETRY"] = False``;
- ``noop``: installed and on, with no SDK (the API's no-op tracer: what a project that installed
  worqr[otel] but configured no tracing gets);
- ``sdk``: on, with the SDK recording every span and a batch processor handing them to an
  exporter that drops them (the cost of real spans, without an exporter's network cost).
"""

import os
import sys

MODE = os.environ.get("WORQR_BENCH_TRACING", "noop")
if MODE == "off":
    sys.modules["opentelemetry"] = None  # `import opentelemetry...` raises ImportError

from bench.worqr_settings import *  # noqa: E402,F401,F403
from bench.worqr_settings import WORQR  # noqa: E402


def install_sdk():
    """A global SDK TracerProvider whose spans are batched to an exporter that drops them."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)


if MODE == "disabled":
    WORQR = dict(WORQR, OPENTELEMETRY=False)
elif MODE == "sdk":
    install_sdk()
