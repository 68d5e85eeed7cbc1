"""worqr: a reliable, atomic work queue on Redis, run from Django.

``from queues import Queue, handler`` is the public API; the engine below ``queues.engine``
imports nothing from Django.
"""

from .engine import Queue, RetryLater, Task, handler

__all__ = ["Queue", "RetryLater", "Task", "handler"]
