"""ProcessPool: runs isolated sync handlers in pre-forked processes, one per slot.

1. ``start_server`` (before the worker's event loop and threads start) forks the fork server;
   ``start`` forks one handler process per slot from it.
2. ``submit(task)`` returns a ``Run``, an asyncio future, and hands the task to an idle process
   (or to the next one ready). The run resolves with the handler's outcome: its result,
   ``RetryLater``, ``HandlerFailed`` (the error as its process described it), or
   ``WorkerCrashed`` when the process died by itself ("handler process exited with signal 11").
3. ``Run.stop()`` (a timeout, a cancel): SIGTERM to its process, SIGKILL after KILL_GRACE. The
   run is cancelled only once the process is gone, so whatever waits for the run (the lock kept
   for it, its slot) waits for the process's end. ``stop(now=True)`` sends SIGKILL at once.
4. A process that has gone (stopped, crashed, or retired after ``max_tasks`` tasks or over
   ``max_memory`` MB of resident memory) is replaced by a fresh one. Processes that keep dying
   before they are ready (a broken initializer) make the pool call ``on_broken``.
"""

import asyncio
import itertools
import logging
import os
import signal
from collections import deque

from .. import faults
from ..backoff import Backoff
from ..errors import ChunkFailed, ConfigurationError, RateLimited, RetryLater, WorkerCrashed
from ..limits import StartedLate
from ..registry import check_importable
from . import child
from .chunks import ChunkTasks
from .forkserver import ForkServer

log = logging.getLogger("worqr.worker")

#: Handler processes in a row that die before they are ready before the pool gives up.
MAX_EARLY_DEATHS = 3


class HandlerFailed(Exception):
    """An isolated handler raised: its error and traceback, as described in its process."""

    def __init__(self, description, trace):
        super().__init__(description)
        self.description, self.trace = description, trace


class Run(asyncio.Future):
    """One task run by an isolated handler. Don't ``cancel()`` it: ``stop()`` it. ``start_by``:
    the ``time.monotonic()`` after which its handler must not start (``StartedLate``), or None."""

    def __init__(self, pool, task, trace="", start_by=None):
        super().__init__(loop=pool.loop)
        self.pool, self.task, self.trace, self.proc = pool, task, trace, None
        self.start_by = start_by

    def stop(self, now=False):
        """Stop the handler's process: SIGTERM, then SIGKILL after KILL_GRACE (``now``: SIGKILL);
        the run is cancelled once the process is gone."""
        self.pool._stop(self, now)

    def tell_cancelled(self, task_id):
        """Task ``task_id`` of this run's chunk is cancelled: its process marks its copy of the
        task (``task.cancelled``), as a thread-run chunk's handler sees the worker's own."""
        p = self.proc
        if p is not None and p.run is self and not self.done() and p.transport is not None:
            if not p.transport.is_closing():
                p.transport.write(child.frame(("cancel", task_id)))


class _Proc:
    """One handler process, as the worker sees it."""

    def __init__(self, number, sock, loop):
        self.number, self.sock, self.pid = number, sock, None
        self.link = None  # the child.Frames protocol reading its socket
        self.run = None  # the Run it is running
        self.tasks = 0
        self.stopping = self.retiring = False
        self.exited = loop.create_future()  # its exit code, as the fork server reports it
        self.kill_timer = None
        self.watcher = None  # the asyncio task that connects to it and, at its end, settles its run

    @property
    def transport(self):
        return self.link.transport if self.link is not None else None

    def signal(self, sig):
        if self.pid is not None and not self.exited.done():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass


def describe_exit(code):
    if code is None:
        return "handler process exited"
    if code < 0:
        return f"handler process exited with signal {-code}"
    return f"handler process exited with exit code {code}"


class ProcessPool:
    def __init__(self, specs, size, *, kill_grace, max_tasks=None, max_memory=None, child_init=None, on_broken=None):
        self.server = ForkServer(specs, child_init, measure_memory=max_memory is not None)
        self.size, self.kill_grace = size, kill_grace
        self.max_tasks, self.max_memory = max_tasks, max_memory
        self.on_broken = on_broken
        self.procs = {}  # number -> _Proc
        self.idle = deque()
        self.waiting = deque()  # runs no process has taken yet
        self.numbers = itertools.count(1)
        self.early_deaths = 0
        self.respawn = Backoff(0.2, 30.0)  # after an early death: 0.2 s, 0.4 s ...
        self.closing = False
        self.loop = None

    def start_server(self):
        self.server.start()

    async def start(self):
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.server.fileno(), self._on_exits)
        for _ in range(self.size):
            self._spawn()

    # -- runs ------------------------------------------------------------------------------

    def submit(self, task, trace="", start_by=None):
        """Run ``task`` in a handler process; ``trace``: the run span, ``tracing.carried``;
        ``start_by``: as ``Run``'s (the process looks at its clock before it starts the handler)."""
        run = Run(self, task, trace, start_by)
        if self.idle:
            self._hand(self.idle.popleft(), run)
        else:
            self.waiting.append(run)
        return run

    def _hand(self, p, run):
        p.run, run.proc = run, p
        p.transport.write(child.frame((run.task.queue, run.task, run.trace, run.start_by)))

    def _ready(self, p):
        if self.waiting:
            self._hand(p, self.waiting.popleft())
        else:
            self.idle.append(p)

    def _answer(self, p, reply):
        if p.stopping:
            return  # it is being stopped: its run ends when it has gone
        run, p.run = p.run, None
        p.tasks += 1
        kind, rss = reply[0], reply[-1]
        if run is not None and not run.done():
            if kind == "ok":
                run.set_result(reply[1])
            elif kind == "chunk":  # a chunk handler's ChunkFailed, described in the process
                run.set_exception(ChunkFailed({i: _failure(failure) for i, failure in reply[1].items()}))
            elif kind == "late":
                run.set_exception(StartedLate(f"task {run.task.id}: its handler could not start in time"))
            else:  # ("retry" | "limited" | "error", ..., rss)
                run.set_exception(_failure(reply))
        if (self.max_tasks and p.tasks >= self.max_tasks) or (self.max_memory and rss > self.max_memory):
            log.debug("worqr: retiring handler process %s after %d task(s), %.0f MB", p.pid, p.tasks, rss)
            p.retiring = True
            p.transport.close()  # it reads the end of its socket and exits
            return
        self._ready(p)

    def _stop(self, run, now):
        if run.done():
            return
        p = run.proc
        if p is None:  # not handed to a process yet
            self.waiting.remove(run)
            run.cancel()
            return
        if now:
            p.stopping = True
            p.signal(signal.SIGKILL)
        elif not p.stopping:
            p.stopping = True
            p.signal(signal.SIGTERM)
            p.kill_timer = self.loop.call_later(self.kill_grace, p.signal, signal.SIGKILL)

    # -- processes -------------------------------------------------------------------------

    def _spawn(self):
        if self.closing:
            return
        number = next(self.numbers)
        try:
            sock = self.server.fork(number)
        except OSError as exc:  # the fork server is gone: _on_exits says so (and stops the worker)
            log.error("worqr: could not ask for a handler process: %s", exc)
            return
        p = _Proc(number, sock, self.loop)
        self.procs[number] = p
        p.watcher = asyncio.ensure_future(self._watch(p))

    def _said(self, p, message):
        if message[0] == "report":  # ("report", fraction, message, lines, task id): task.progress / task.log
            if p.run is not None:
                fraction, text, lines, task_id = message[1:5]
                report = {"fraction": fraction, "message": text, "lines": lines}
                if isinstance(p.run.task, ChunkTasks):  # a chunk's tasks: on the one that reported
                    p.run.task.pass_report(task_id, **report)
                else:
                    p.run.task.pass_report(**report)
            return
        if p.pid is None:  # its first words: ("ready", pid)
            p.pid = message[1]
            self.early_deaths = 0
            self.respawn.reset()
            self._ready(p)
        else:
            self._answer(p, message)

    async def _watch(self, p):
        """Connect to process ``p``; once its socket has closed (or the link to it failed), settle
        its run and replace it. Whatever fails here, the process is ended and replaced: a watcher
        that died silently would have left its slot, and any run handed to it, waiting forever."""
        closed = self.loop.create_future()
        try:
            faults.raise_once("procpool-link-raise")
            p.link = child.Frames(lambda message: self._said(p, message), closed)
            await self.loop.create_unix_connection(lambda: p.link, sock=p.sock)
            await closed
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("worqr: lost the link to handler process %s; ending it", p.pid or f"#{p.number}")
            p.signal(signal.SIGKILL)
            if p.link is not None and p.link.transport is not None:
                p.link.transport.abort()
            else:
                p.sock.close()  # it reads the end of its socket and exits
        try:
            code = await asyncio.wait_for(asyncio.shield(p.exited), 2.0)
        except TimeoutError:  # its socket closed but it lives on: end it
            p.signal(signal.SIGKILL)
            code = await p.exited
        self._gone(p, code)

    def _gone(self, p, code):
        self.procs.pop(p.number, None)
        if p in self.idle:
            self.idle.remove(p)
        if p.kill_timer is not None:
            p.kill_timer.cancel()
        run = p.run
        if run is not None and not run.done():
            if p.stopping:
                run.cancel()
            else:
                run.set_exception(WorkerCrashed(describe_exit(code)))
        if self.closing:
            return
        if p.pid is None:
            self.early_deaths += 1
            log.error("worqr: a handler process died before it was ready (%s)", describe_exit(code))
            if self.early_deaths >= MAX_EARLY_DEATHS and self.on_broken is not None:
                self.on_broken(WorkerCrashed(f"handler processes die before they are ready ({describe_exit(code)})"))
                return
            self.loop.call_later(self.respawn.next(), self._spawn)
            return
        if run is None and not (p.stopping or p.retiring):
            log.warning("worqr: an idle handler process (pid %s) went away: %s", p.pid, describe_exit(code))
        self._spawn()

    def _on_exits(self):
        reports = self.server.exits()
        if reports is None:  # the fork server is gone, and its processes with it
            self.loop.remove_reader(self.server.fileno())
            for p in list(self.procs.values()):
                if not p.exited.done():
                    p.exited.set_result(None)
            if not self.closing and self.on_broken is not None:
                self.on_broken(WorkerCrashed("the fork server of the handler processes died"))
            self.closing = True
            return
        for number, code in reports:
            p = self.procs.get(number)
            if p is not None and not p.exited.done():
                p.exited.set_result(code)

    def close(self):
        """Kill every handler process (a busy one at once) and stop the fork server."""
        if self.closing and self.server.sock is None:
            return
        self.closing = True
        if self.loop is not None and self.server.sock is not None:
            self.loop.remove_reader(self.server.fileno())
        for p in list(self.procs.values()):
            if p.run is not None:
                p.signal(signal.SIGKILL)
            if p.watcher is not None:
                p.watcher.cancel()
            if p.transport is not None:
                p.transport.close()
        for run in self.waiting:
            run.cancel()
        self.waiting.clear()
        self.server.close()


#: The most handler processes a worker forks (one per slot, at its start): a typo in
#: ``--concurrency`` must not fork until the machine runs out of processes.
MAX_PROCESSES = 1024


def for_worker(specs, size, config, *, max_tasks=None, max_memory=None, child_init=None, on_broken=None):
    """The pool for the isolated handlers among a worker's ``specs`` (None if there are none),
    after checking that each can be found by its module path and that the limits make sense."""
    if max_tasks is not None and (isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 1):
        raise ConfigurationError("max_tasks_per_child must be an integer >= 1")
    if max_memory is not None and (
        isinstance(max_memory, bool) or not isinstance(max_memory, (int, float)) or not max_memory > 0
    ):
        raise ConfigurationError("max_memory must be a number of MB > 0")
    isolated = {q: spec for q, spec in specs.items() if spec.isolation == "process"}
    if not isolated:
        if max_tasks is not None or max_memory is not None:
            raise ConfigurationError(
                "max_tasks_per_child and max_memory recycle the processes of isolated handlers, and no "
                'handler served here runs with isolation="process"'
            )
        return None
    if size > MAX_PROCESSES:
        raise ConfigurationError(
            f"a worker with isolated handlers forks one process per slot: its concurrency must be at most "
            f"{MAX_PROCESSES:,} (--concurrency), not {size:,}"
        )
    for spec in isolated.values():
        check_importable(spec)
    return ProcessPool(
        isolated,
        size,
        kill_grace=config.kill_grace,
        max_tasks=max_tasks,
        max_memory=max_memory,
        child_init=child_init,
        on_broken=on_broken,
    )


def _failure(failure):
    """The exception of a failed attempt as its process described it (``child._failure``):
    (kind, delay or text, message or traceback)."""
    kind = failure[0]
    if kind == "retry":
        return RetryLater(failure[1], failure[2])
    if kind == "limited":
        return RateLimited(failure[1], failure[2])
    return HandlerFailed(failure[1], failure[2])
