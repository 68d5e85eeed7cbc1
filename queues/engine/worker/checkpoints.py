"""Checkpoints: runs a generator handler (sync or async) whose yields are checkpoints.

1. Before the generator starts, ``checkpoint_begin`` counts the run and reads the task's last
   saved checkpoint into ``task.checkpoint`` (None on a first run). A holder whose lease is stale
   does not run it.
2. Each yielded value is checked (JSON-serialisable as UTF-8 text, lists and dicts nested at most
   ``CHECKPOINT_DEPTH_MAX`` levels deep, at most ``CHECKPOINT_MAX`` bytes as JSON; else
   ``InvalidCheckpoint``: a failed attempt) and becomes the pending checkpoint. At most once
   per ``checkpoint_every`` seconds the pending one is saved (``checkpoint``, fenced by the
   lease); the generator waits for the save, so a crash loses at most the steps since the last
   save (one interval's worth).
3. At each yield the run looks whether it must stop: the worker is stopping, or the
   task was cancelled or timed out (``task.cancelled``; a timeout's failure is recorded once it
   stopped there, or after KILL_GRACE). It then closes the generator (its ``finally`` blocks
   run), saves the pending checkpoint (also when closing it raised: that error then fails the
   attempt) and returns ``STOPPED`` (the worker stopping, or a refused save); the processor gives
   a stopped task back to the front of its queue, its attempt not counted (``give_back``), and
   reports a cancelled or timed out one as usual. A refused save (the task was taken from this
   worker) stops it the same way.
4. When the generator ends (returns or raises), the pending checkpoint is saved first, so a retry
   resumes from it. A sync generator's ``return value`` is the handler's result.

Saves are serialised on the event loop (one ``asyncio.Lock`` per run), each taking the latest
pending value, so a checkpoint never moves back.
"""

import asyncio
import collections.abc
import json
import logging
import threading
import time

from .. import commands
from ..codes import Code
from ..connection import NETWORK_ERRORS, raise_if_cancelling
from ..errors import InvalidCheckpoint

log = logging.getLogger("worqr.worker")

#: A checkpoint's largest size, as JSON text (bytes of UTF-8).
CHECKPOINT_MAX = 65536
#: How deep a checkpoint's lists and dicts may nest (``[[1]]`` is 2 levels): a deeper one could
#: be written but not read back (``json.loads`` recurses once per level).
CHECKPOINT_DEPTH_MAX = 100
#: What a generator handler's run returns when it stopped at a yield for the worker's shutdown
#: (or because its lease went stale): its task is given back, not completed.
STOPPED = object()
_NOTHING = object()


def _too_deep(value):
    """Whether ``value``'s lists (tuples) and dicts nest more than CHECKPOINT_DEPTH_MAX levels
    deep (iterative: no recursion; a scalar costs one isinstance)."""
    if not isinstance(value, (list, tuple, dict)):
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > CHECKPOINT_DEPTH_MAX:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (list, tuple, dict)):
                stack.append((child, depth + 1))
    return False


def encode(task, value):
    """``value`` as the JSON text saved for ``task``; InvalidCheckpoint when it can't be (not
    JSON, not UTF-8, nested too deep, too big)."""
    where = f"task {task.id} of queue {task.queue!r}"
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        data = text.encode("utf-8")  # strict: a lone surrogate ("\ud800") can't be sent to Redis
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidCheckpoint(
            f"{where}: a checkpoint must be JSON-serialisable; the handler yielded a {type(value).__name__} ({exc})"
        ) from None
    size = len(data)
    if size > CHECKPOINT_MAX:
        raise InvalidCheckpoint(
            f"{where}: a checkpoint is at most {CHECKPOINT_MAX:,} bytes as JSON; the handler yielded {size:,}"
        )
    # after json.dumps (no cycle) and the size (so the walk is bounded by what was written)
    if _too_deep(value):
        raise InvalidCheckpoint(
            f"{where}: a checkpoint's lists and dicts nest at most {CHECKPOINT_DEPTH_MAX} levels deep; "
            f"the handler yielded a {type(value).__name__} nested deeper"
        )
    return text


class Context:
    """What every run needs: the worker's ``loop``, its asyncio ``redis`` client, its ``status``
    (``stopping``) and ``kill_grace`` (how long a timeout waits for the next yield)."""

    def __init__(self, loop, redis, status, kill_grace):
        self.loop, self.redis, self.status, self.kill_grace = loop, redis, status, kill_grace


class Run:
    """One delivery's run of a generator handler: ``wrap`` its function, ``save`` its pending
    checkpoint (on the loop)."""

    def __init__(self, context, d):
        self.context, self.d, self.task = context, d, d.task
        self.every = d.spec.checkpoint_every
        self.pending = _NOTHING  # the last yielded value's JSON, not saved yet
        self.guard = threading.Lock()  # ``pending`` is set on the handler's thread, taken on the loop
        self.saving = asyncio.Lock()
        self.last_save = time.monotonic()
        self.stale = False  # a save was refused: the task is no longer ours
        self.saves = 0

    @property
    def stopping(self):
        """The worker is stopping (a stop signal): stop at the next yield and give the task back."""
        return self.context.status.stopping

    def must_stop(self):
        return self.stopping or self.stale or self.task.cancelled

    async def begin(self):
        """Count the run and read the last checkpoint; False if the task is no longer ours."""
        task = self.task
        code, text, runs = await commands.checkpoint_begin(task.queue, task.id, task.lease).arun(self.context.redis)
        if code != Code.OK:
            log.warning("worqr: task %s was taken from this worker before its run began; not running it", task.id)
            return False
        try:
            checkpoint = json.loads(text) if text is not None else None
        except (ValueError, RecursionError) as exc:  # not written so by encode() (an older worker's)
            raise InvalidCheckpoint(
                f"task {task.id} of queue {task.queue!r}: its saved checkpoint can't be read back "
                f"({type(exc).__name__}: {exc})"
            ) from None
        task.begin_run(checkpoint, runs)
        self.last_save = time.monotonic()
        return True

    async def save(self):
        """Save the pending checkpoint, if any (best effort through network errors: the value
        stays pending for the next save)."""
        async with self.saving:
            with self.guard:
                text, self.pending = self.pending, _NOTHING
            if text is _NOTHING:
                return
            task = self.task
            try:
                code = await commands.checkpoint(task.queue, task.id, task.lease, text).arun(self.context.redis)
            except NETWORK_ERRORS as exc:
                raise_if_cancelling()
                log.warning("worqr: could not save the checkpoint of task %s: %s", task.id, exc)
                with self.guard:
                    if self.pending is _NOTHING:
                        self.pending = text
                return
            finally:
                self.last_save = time.monotonic()
            if code == Code.OK:
                self.saves += 1
            else:
                self.stale = True

    async def stop_at_yield(self):
        """Its timeout passed: let the generator stop at its next yield (it saves its checkpoint
        there and returns), waiting up to KILL_GRACE for it, then save what is pending, so the
        retry resumes from its last yield (a step cut short by a cancel after the wait is done
        again)."""
        self.task.set_cancelled()
        handle = self.d.handle
        if handle is not None and not handle.done():
            await asyncio.wait((handle,), timeout=self.context.kill_grace)
        await self.save()

    def _yielded(self, value):
        """Note a yielded value; whether a save is due."""
        text = encode(self.task, value)
        with self.guard:
            self.pending = text
        return time.monotonic() - self.last_save >= self.every

    def _on_loop(self, coro):
        """Run ``coro`` on the worker's loop from the handler's thread, and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.context.loop).result()

    def _save_from_thread(self):
        try:
            self._on_loop(self.save())
        except RuntimeError:  # the loop is closed: the worker is exiting (the task goes back by lease)
            pass

    def wrap(self, func):
        """The function the worker runs in place of the generator function ``func``."""
        if self.d.is_async:

            async def run_async(task):
                if not await self.begin():
                    return STOPPED
                agen, result = _generator(func(task), collections.abc.AsyncGenerator, self.d), None
                try:
                    async for value in agen:
                        if self._yielded(value):
                            await self.save()
                        if self.must_stop():
                            # given back only when it stopped here for the worker's stop (or a
                            # refused save); one that ran to its end is done, as a sync one
                            result = STOPPED if self.stopping or self.stale else None
                            break
                finally:
                    try:
                        await agen.aclose()
                    finally:  # its own ``finally`` may raise: the pending checkpoint is saved first
                        await self.save()
                return result

            return run_async

        def run(task):
            if not self._on_loop(self.begin()):
                return STOPPED
            gen, result = _generator(func(task), collections.abc.Generator, self.d), None
            try:
                while True:
                    try:
                        value = next(gen)
                    except StopIteration as end:
                        result = end.value
                        break
                    if self._yielded(value):
                        self._on_loop(self.save())
                    if self.must_stop():
                        result = STOPPED if self.stopping or self.stale else None
                        break
            finally:
                try:
                    gen.close()
                finally:  # its own ``finally`` may raise: the pending checkpoint is saved first
                    self._save_from_thread()
            return result

        return run


def _generator(made, kind, d):
    """``made``, what the handler's call returned, if it is the generator (a decorator that
    passes the call on returns it); TypeError if it is not."""
    if not isinstance(made, kind):
        raise TypeError(
            f"handler {d.spec.queue!r} is a generator function, but calling it (through its decorators) "
            f"returned a {type(made).__name__}, not a generator: a decorator must return the generator"
        )
    return made


async def give_back(reporter, d):
    """``d`` stopped at a checkpoint: its task goes back first in line, its attempt not counted."""
    reporter.log_outcome(d, "stopped")
    codes = await reporter.call(commands.stop(d.task.queue, reporter.name, [(d.task.id, d.task.lease, False)]))
    if codes is not None and codes[0] == Code.STALE:
        d.refused()  # whoever took the task may have kept its lock for this handler
        reporter.release_if_due(d)
