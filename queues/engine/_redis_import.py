"""Imported first by ``queues.engine``: redis-py, without what it would load for nothing."""

import sys


def _import_redis():
    """Import redis-py without the OpenTelemetry metrics SDK it would load for nothing.

    redis-py 8 imports ``opentelemetry.sdk.metrics`` (and, through it, psutil) when it is
    installed, at import time, only for a type hint: its own metrics, which an application must
    turn on, import it again when they start. That costs every process about 3.5 MiB (an idle
    worker's RSS goes from 58 to 55 MiB), so redis is imported here with that one import refused
    (the import is guarded in redis-py); the refusal is lifted right after, so the application
    and redis-py's metrics import the SDK as usual. If redis is already imported, or the SDK is,
    nothing changes; if redis-py ever needs it at import time, redis is imported normally.
    """
    blocked = "opentelemetry.sdk.metrics"
    if "redis" in sys.modules or blocked in sys.modules:
        return
    sys.modules[blocked] = None  # makes `import opentelemetry.sdk.metrics` raise ImportError
    try:
        import redis  # noqa: F401
    except ImportError:
        del sys.modules[blocked]
        import redis  # noqa: F401
    finally:
        if blocked in sys.modules and sys.modules[blocked] is None:
            del sys.modules[blocked]


_import_redis()
