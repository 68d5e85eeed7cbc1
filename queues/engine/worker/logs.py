"""The worker's JSON log format: one JSON object per line, for log pipelines.

Every line has ``time`` (UTC, ISO 8601 with ms), ``level``, ``logger``, ``message`` and ``worker``.
A task's outcome line (``Reporter.log_outcome``) adds ``queue``, ``task_id``, ``attempt``,
``outcome``, ``duration_ms`` (and ``error``: a failed attempt's error, a deferral's reason;
``retry_in``: the seconds until it runs again) and,
when tracing is on, the run span's ``trace_id`` and ``span_id`` (32 and 16 hex digits, as tracing
backends show them), so logs and traces join up. Any other line written inside a span (a
handler's own logging) carries that span's ids; a line with an exception adds ``traceback``.
"""

import json
import logging
import time

from .. import tracing

#: Fields copied from a record's ``extra`` when present, in this order.
TASK_FIELDS = ("queue", "task_id", "attempt", "outcome", "duration_ms", "retry_in", "error", "trace_id", "span_id")


class JsonFormatter(logging.Formatter):
    def __init__(self, worker):
        super().__init__()
        self.worker = worker

    def format(self, record):
        seconds = int(record.created)
        out = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "worker": getattr(record, "worker", self.worker),
        }
        for name in TASK_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = value
        if "trace_id" not in out and (ids := tracing.current_ids()):
            out["trace_id"], out["span_id"] = ids
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        elif trace := getattr(record, "traceback", None):  # a text line's traceback, as a field
            out["traceback"] = trace
            out["message"] = out["message"].partition("\n")[0]
        return json.dumps(out, default=str)


def use_json(worker):
    """Format every line of the process's log handlers (the root logger's and worqr's) as JSON."""
    formatter = JsonFormatter(worker)
    loggers = [logging.getLogger(), logging.getLogger("worqr"), logging.getLogger("worqr.worker")]
    for logger in loggers:
        for handler in logger.handlers:
            handler.setFormatter(formatter)
