"""Daemon threads for sync handlers.

Unlike ``concurrent.futures.ThreadPoolExecutor``, whose threads are joined at interpreter exit,
these never hold up the exit of a worker whose grace period ran out on a stuck handler.
"""

import collections
import queue
import threading

from .contained import returned_coroutine, settable


class ThreadPool:
    """Threads take jobs from a queue; results are handed back to the event loop in batches
    (one loop wake-up for however many finished meanwhile, not one per job). Threads start as
    jobs need them, up to ``size``, and then stay: an idle worker has none (0.4 MiB less with 8)."""

    def __init__(self, size, name="worqr-handler"):
        self._jobs = queue.SimpleQueue()
        self._done = collections.deque()
        self._drain_scheduled = False
        self._size, self._name = size, name
        self._threads = []
        self._running = 0  # jobs submitted whose results the loop has not taken back yet

    def _grow(self):
        """Start one more thread if every thread has a job (``submit`` and ``_drain`` both run
        on the loop's thread, so ``_running`` needs no lock; a result not drained yet only makes
        a thread start a little early)."""
        if self._running > len(self._threads) and len(self._threads) < self._size:
            thread = threading.Thread(target=self._loop, name=f"{self._name}-{len(self._threads)}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _loop(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            loop, future, func, arg = job
            try:
                result = func(arg)
                exc = returned_coroutine(result)  # a hidden async def: its work was not done
            except BaseException as e:  # handed to the loop, which reports it
                result, exc = None, settable(e)
            self._done.append((future, result, exc))
            if not self._drain_scheduled:
                self._drain_scheduled = True
                try:
                    loop.call_soon_threadsafe(self._drain)
                except RuntimeError:  # the loop is closed: the worker is exiting
                    return

    def _drain(self):
        self._drain_scheduled = False
        while self._done:
            future, result, exc = self._done.popleft()
            self._running -= 1
            if future.done():
                continue
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(result)

    def submit(self, loop, func, arg):
        """Run ``func(arg)`` on a pool thread; returns an asyncio future on ``loop``."""
        future = loop.create_future()
        self._jobs.put((loop, future, func, arg))
        self._running += 1
        self._grow()
        return future

    def shutdown(self):
        for _ in self._threads:
            self._jobs.put(None)
