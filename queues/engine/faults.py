"""Fault injection for tests: ``WORQR_FAULT`` names the points (comma-separated) where a process
fails on purpose. Points that kill (``kill``): ``drain-kill``, ``drain-kill-after``
(``workflows.drain``), ``register-kill`` (a worker, once registered on its first queue only).
Points that raise an unexpected error once per process (``raise_once``): ``heartbeat-raise``, ``scheduler-raise`` (the worker's helpers), ``relay-raise`` (the outbox
relay), to see a helper's failure logged and the helper started again, and
``procpool-link-raise`` (the link to a handler process: the process is ended and replaced). A
point that signals: ``fetch-yield-sigterm`` (``sigterm_once``: a stop signal lands while the
worker's fetcher yields to the event loop with a task running). A point that swallows a cancel:
``linker-deaf`` (``deaf``: the linker goes on 10 s after it is cancelled, as a helper whose cancel
a library swallowed would)."""

import asyncio
import logging
import os
import signal
import threading
import time


class InjectedFault(RuntimeError):
    """The error a ``raise_once`` point raises."""


_raised = set()
_lock = threading.Lock()


def active(point):
    return point in os.environ.get("WORQR_FAULT", "").split(",")


def kill(point):
    """SIGKILL this process at ``point`` when it is named."""
    if active(point):
        os.kill(os.getpid(), signal.SIGKILL)


def _first_time(point):
    """Whether ``point`` is named and reached for the first time in this process."""
    if not active(point):
        return False
    with _lock:
        if point in _raised:
            return False
        _raised.add(point)
        return True


def raise_once(point):
    """Raise InjectedFault the first time ``point`` is reached in this process, when it is named."""
    if _first_time(point):
        raise InjectedFault(f"fault injected at {point} (WORQR_FAULT)")


async def sigterm_once(point, handled):
    """The first time ``point`` is reached in this process, when it is named: send this process
    SIGTERM and yield to the event loop until ``handled()`` (its handler ran), for at most 1 s."""
    if not _first_time(point):
        return
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + 1.0
    while not handled() and time.monotonic() < deadline:
        await asyncio.sleep(0)


async def deaf(point, seconds=10.0):
    """When ``point`` is named: a cancel during the next ``seconds`` is swallowed (the coroutine
    goes on to the end of them, then returns), as a library that catches CancelledError would."""
    if not active(point):
        return
    logging.getLogger("worqr").warning("worqr: fault injected at %s: cancels swallowed for %.0f s", point, seconds)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            await asyncio.sleep(left)
        except asyncio.CancelledError:
            pass
