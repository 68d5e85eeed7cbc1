"""Waiting: the one backoff of the package (a delay doubling up to a cap, back to the first after
a success), for coroutines, threads and plain loops; and waiting for an event with an optional
timeout.

The asyncio waits re-raise a cancellation that Python 3.11's ``asyncio.wait_for`` swallowed (a
cancel landing as the event is set: the wait returns normally, and a loop around it, asked to
stop, would go on)."""

import asyncio
import time

from .connection import raise_if_cancelling


async def wait_event(event, timeout=None):
    """Wait until ``event`` is set, or ``timeout`` seconds (None: no limit) have passed."""
    if timeout is None:
        await event.wait()
        return
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        pass
    raise_if_cancelling()


class Backoff:
    """Delays of ``first`` seconds doubling up to ``cap`` (``immediate``: the first one is 0, then
    ``first``...); ``reset()`` after a success. ``next()`` hands out the delay to wait;
    ``await wait()`` (asyncio) or ``sleep()`` (a thread) wait it."""

    def __init__(self, first=0.05, cap=2.0, *, immediate=False):
        self.first, self.cap, self.immediate = first, cap, immediate
        self.reset()

    def reset(self):
        self.delay = 0.0 if self.immediate else self.first

    def next(self):
        """The delay to wait now; the following one is twice as long (up to the cap)."""
        delay = self.delay
        self.delay = min(max(delay * 2, self.first), self.cap)
        return delay

    async def wait(self, event=None):
        """Sleep the next delay, or until ``event`` (an asyncio.Event) is set."""
        delay = self.next()
        if event is None:
            await asyncio.sleep(delay)
            return
        try:
            await asyncio.wait_for(event.wait(), delay)
        except TimeoutError:
            pass
        raise_if_cancelling()

    def sleep(self, deadline=None):
        """Sleep the next delay and return True; or return False at once (the delay kept) when the
        sleep would end after ``deadline`` (time.monotonic()): time to give up."""
        if deadline is not None and time.monotonic() + self.delay > deadline:
            return False
        time.sleep(self.next())
        return True
