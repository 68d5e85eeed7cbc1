"""What the worker's pieces share, passed to each of them instead of the whole worker:

- ``Capsule`` (as Sidekiq calls it): what a worker serves and how, fixed once it is made: its
  name, queues in priority order, their handlers, its slots and settings;
- ``Status``: how it is doing, which changes as it runs: stopping (and the grace left), registered,
  and the events its pieces wait on.
"""

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("worqr.worker")


@dataclass(frozen=True)
class Capsule:
    name: str
    queues: list
    specs: dict  # queue -> HandlerSpec
    concurrency: int
    config: Any  # config.Config
    started_at: str  # ISO 8601, UTC
    callback_handler: Any = None  # the HandlerSpec of tasks that carry a callback URL

    def timeout_grace(self, queue):
        """How long past its timeout a task of ``queue`` may run before Redis takes it back (the
        deadline ``start`` sets when it is taken): ``TIMEOUT_GRACE``, plus a chunk queue's
        ``chunk_wait``, for its timeout counts from its chunk's call, which starts at most that
        long after it is taken."""
        spec = self.specs[queue]
        return self.config.timeout_grace + (spec.chunk_wait if spec.chunk else 0)

    def spec_for(self, queue, task):
        """The handler of a task: the queue's, or the webhook deliverer for a callback task."""
        return self.callback_handler if task.callback and self.callback_handler else self.specs[queue]


class Status:
    """A worker's run state. ``changed`` wakes the fetcher (and shutdown) when something changed:
    a slot freed, an outcome to send, a wake-up; ``stopped`` is set once a stop is asked;
    ``subscribed`` once the control channel first listens."""

    def __init__(self, grace):
        self.grace = grace
        self.stopping = False
        self.quiet = False  # told to take no more tasks (``q`` on the control channel); it keeps running
        self.registered = False
        self.changed = asyncio.Event()
        self.stopped = asyncio.Event()
        self.subscribed = asyncio.Event()

    def poke(self):
        """Something changed: the fetcher looks again."""
        self.changed.set()

    def go_quiet(self):
        """Take no more tasks; those running finish as usual. Returns False if it was already quiet."""
        if self.quiet:
            return False
        self.quiet = True
        self.changed.set()
        return True

    def stop(self):
        """Stop: take no more work. Asked again, the grace ends: running tasks are given back now."""
        if self.stopping:
            log.warning("worqr: second stop signal: giving running tasks back now")
            self.grace = 0
        self.stopping = True
        self.stopped.set()
        self.changed.set()

    def set_registered(self, registered):
        self.registered = registered
