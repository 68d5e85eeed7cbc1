"""Waiting: backoff between retries of a Redis call that failed on the network (50 ms doubling
to 2 s), and waiting for an event with an optional timeout."""

import asyncio


async def wait_event(event, timeout=None):
    """Wait until ``event`` is set, or ``timeout`` seconds (None: no limit) have passed."""
    if timeout is None:
        await event.wait()
        return
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        pass


class Backoff:
    """``await backoff.wait()`` sleeps the current delay (or until ``event`` is set) and doubles
    it up to ``cap``; ``reset()`` after a success."""

    def __init__(self, first=0.05, cap=2.0):
        self.first, self.cap = first, cap
        self.delay = first

    def reset(self):
        self.delay = self.first

    def next(self):
        """The delay to wait now; the following one is twice as long (up to the cap)."""
        delay = self.delay
        self.delay = min(self.delay * 2, self.cap)
        return delay

    async def wait(self, event=None):
        delay = self.next()
        if event is None:
            await asyncio.sleep(delay)
            return
        try:
            await asyncio.wait_for(event.wait(), delay)
        except TimeoutError:
            pass
