"""Sending an enqueue's calls to Redis: retried through network errors for ``ENQUEUE_RETRY_FOR``,
within a bounded time, safely, and with an exact account when Redis stays unreachable.

Every path that enqueues (``Queue.enqueue`` and ``enqueue_many``, a batch's tasks, the outbox's
pushes, the Tasks backend) sends its calls through one ``Sending``:

1. **Safe to send again.** A call whose reply is lost (a connection reset or a timeout after
   Redis ran it) is sent again with the same ids; enqueue is idempotent by id, in the script: an
   id whose task exists, or ended lately, is left as it is. "Lately" covers every retry: each
   call tells Redis its ``window`` (ENQUEUE_RETRY_FOR + one try's timeouts + 1 s, whole
   seconds), and the queue's record of ended tasks keeps every task that ended within the
   longest window in use (``lua/includes/resend.lua``). It costs no memory per pending task.
2. **Bounded.** The retries of a call end ENQUEUE_RETRY_FOR after the start of the call's first
   failed try; a try waits for its reply ENQUEUE_SOCKET_TIMEOUT at most (the enqueue client's
   timeout). So an enqueue from a web request returns or raises within ENQUEUE_RETRY_FOR +
   ENQUEUE_SOCKET_TIMEOUT of its first failure (+ up to the 1 s connect timeout when that last
   try also waits to connect). A later call of the same enqueue (calls of 500
   tasks) gets one try once that time is up: an enqueue that goes on while Redis answers is not
   cut short, one that meets Redis gone again raises at its first failure.
3. **Exact account.** ``RedisUnavailable`` lists the ids acknowledged (``added``), those sent
   without an answer (``unknown``: they may have been added) and the rest (``not_added``: never
   sent, or refused before Redis could run them: ``direct.unsent``).
"""

import logging
import math
import time

from . import keys, unserved
from .backoff import Backoff
from .config import ENQUEUE_CONNECT_TIMEOUT
from .connection import NETWORK_ERRORS
from .direct import unsent
from .errors import RedisUnavailable

log = logging.getLogger("worqr")

#: An enqueue's calls are retried through network errors after pauses of 50 ms doubling to 0.5 s.
FIRST_PAUSE, MAX_PAUSE = 0.05, 0.5
#: Added to a call's window (s): Redis's clock may step (NTP, a failover to another host).
WINDOW_MARGIN = 1.0


def window(config, retry_for):
    """The window (whole seconds) within which a call may be sent again: its retries last
    ``retry_for`` from its first failed try, and the last try may wait for its connection and its
    reply (``ENQUEUE_CONNECT_TIMEOUT``, ``Config.enqueue_attempt_timeout``) before Redis runs it."""
    connect = min(ENQUEUE_CONNECT_TIMEOUT, config.enqueue_socket_timeout)
    return math.ceil(retry_for + connect + config.enqueue_attempt_timeout + WINDOW_MARGIN)


class Sending:
    """The calls of one enqueue of ``ids`` (in order) to ``queue`` (``retry_for``: seconds of
    retries, ``ENQUEUE_RETRY_FOR`` when None). ``send(attempt, n)`` for each call, in order, of
    the next ``n`` ids; ``done(ids)`` with the ids its reply gave; ``known()`` once a call says
    the queue is new."""

    def __init__(self, connection, queue, ids, retry_for=None):
        self.connection, self.queue, self.ids = connection, queue, ids
        config = connection.config
        self.retry_for = config.enqueue_retry_for if retry_for is None else retry_for
        self.window = window(config, self.retry_for)
        self.deadline = None  # set at the first failure: the start of its try + retry_for
        self.at = 0  # ids[:at] are acknowledged
        self.added = []

    def send(self, attempt, n):
        """Run ``attempt()`` (one try of a call carrying the next ``n`` ids) until it returns,
        retrying through network errors until the deadline; returns its reply, or raises
        ``RedisUnavailable``."""
        backoff, reached = Backoff(FIRST_PAUSE, MAX_PAUSE), False
        while True:
            began = time.monotonic()
            try:
                return attempt()
            except NETWORK_ERRORS as exc:
                reached = reached or not unsent(exc)
                if self.deadline is None:
                    self.deadline = began + self.retry_for
                if not backoff.sleep(self.deadline):  # (a try is begun only before the deadline)
                    raise self._unavailable(exc, n, reached) from exc

    def done(self, ids, n=None):
        """The next call's reply: ``ids`` (those it answered; ``n`` ids of the enqueue it carried,
        ``len(ids)`` when None) are in."""
        self.added += ids
        self.at += len(ids) if n is None else n
        unserved.check(self.connection, self.queue)  # once per queue and process

    def known(self):
        """List the queue among the known ones after its first task went in: a SADD (idempotent),
        tried until the deadline (or once if none is set yet and it fails, then until its own).
        The task is in either way, so a failure only logs a warning (a worker of the queue lists
        it when it registers)."""
        backoff = Backoff(FIRST_PAUSE, MAX_PAUSE)
        while True:
            began = time.monotonic()
            if self.deadline is not None and began >= self.deadline:
                log.warning("worqr: queue %s: not listed among the known queues (Redis unreachable)", self.queue)
                return
            try:
                self.connection.enqueue_client.sadd(keys.KNOWN_QUEUES, self.queue)
                return
            except NETWORK_ERRORS as exc:
                if self.deadline is None:
                    self.deadline = began + self.retry_for
                if not backoff.sleep(self.deadline):
                    log.warning("worqr: queue %s: could not list it among the known queues: %s", self.queue, exc)
                    return

    def _unavailable(self, exc, n, reached):
        """The RedisUnavailable for a call of the next ``n`` ids that never got its reply
        (``reached``: one of its tries may have reached Redis)."""
        call, rest = self.ids[self.at : self.at + n], self.ids[self.at + n :]
        unknown, not_added = (call, rest) if reached else ([], call + rest)
        parts = [f"{len(self.added)} added"] if self.added else []
        if unknown:
            shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
            parts.append(f"{len(unknown)} may have been added (no reply came: {shown})")
        if not_added:
            parts.append(f"{len(not_added)} not added")
        total = len(self.ids)
        message = (
            f"queue {self.queue}: Redis unreachable, gave up after retrying for {self.retry_for:g} s "
            f"(WORQR['ENQUEUE_RETRY_FOR']): {exc}; of {total} task{'s' if total != 1 else ''}: {', '.join(parts)}"
        )
        return RedisUnavailable(message, self.queue, self.added, unknown, not_added)
