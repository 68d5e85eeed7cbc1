"""Daemon threads for sync handlers.

Unlike ``concurrent.futures.ThreadPoolExecutor``, whose threads are joined at interpreter exit,
these never hold up the exit of a worker whose grace period ran out on a stuck handler.
"""

import queue
import threading


def _settle(future, result, exc):
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


class ThreadPool:
    def __init__(self, size, name="worqr-handler"):
        self._jobs = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._loop, name=f"{name}-{i}", daemon=True) for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def _loop(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            loop, future, func, arg = job
            try:
                result, exc = func(arg), None
            except BaseException as e:  # handed to the loop, which reports it
                result, exc = None, e
            try:
                loop.call_soon_threadsafe(_settle, future, result, exc)
            except RuntimeError:  # the loop is closed: the worker is exiting
                return

    def submit(self, loop, func, arg):
        """Run ``func(arg)`` on a pool thread; returns an asyncio future on ``loop``."""
        future = loop.create_future()
        self._jobs.put((loop, future, func, arg))
        return future

    def shutdown(self):
        for _ in self._threads:
            self._jobs.put(None)
