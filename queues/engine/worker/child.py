"""An isolated handler's process: what runs there, from its fork to its exit.

1. It dies with its parent (``die_with_parent``), ignores SIGINT (a Ctrl-C reaches the whole
   process group; its worker decides when it stops) and turns SIGTERM into a stop:
   ``task.cancelled`` becomes True and ``Stopped`` is raised inside the handler, so its
   ``finally`` blocks run; the worker sends SIGKILL if it is still there after KILL_GRACE.
2. It runs the initializer it was given (the Django layer's), once, then says it is ready.
3. Then, for each frame its worker sends (a task, the run span's trace context, made current
   around the handler, and the ``time.monotonic()`` after which the handler must not start, or
   None: a rate-limited queue's): runs the queue's handler and sends back one
   frame: ``("ok", result, rss)``, ``("retry", seconds, message, rss)``,
   ``("error", description, traceback, rss)`` or, too late to start it, ``("late", rss)``. Before it, the handler's ``task.progress`` and
   ``task.log`` calls each send a ``("report", fraction, message, lines, task id)`` frame (``_Reports``). End of file (its worker retires it, or is gone):
   it exits 0.
4. While a chunk's call runs, a thread reads the worker's ``("cancel", task id)`` frames and marks
   those tasks cancelled (``task.cancelled``), as a thread-run chunk's tasks are (``_CancelWatch``);
   one that comes after the call has ended is skipped.

It never returns into the code it was forked from: it ends with ``os._exit``, so nothing it
inherited (the worker's connections, atexit hooks) is closed or run twice.

Frames, both ways: a 4-byte big-endian length, then a pickle (``frame``; the worker reads them
with ``Frames``).
"""

import asyncio
import functools
import os
import pickle
import resource
import select
import signal
import struct
import sys
import threading
import time
import traceback

from .. import tracing
from ..errors import ChunkFailed, RateLimited, RetryLater
from .contained import describe, result_value, returned_coroutine

HEADER = struct.Struct("!I")
_PR_SET_PDEATHSIG = 1


@functools.cache
def _libc():
    """The C library, or None. Loaded on first use (in the fork server, whose forks inherit it):
    a worker without isolated handlers never imports ctypes (about 0.5 MiB)."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:  # no C library to call: the parent's socket closing is the fallback
        return None


class Stopped(BaseException):
    """Raised inside an isolated handler by its worker's SIGTERM (a timeout or a cancel)."""


def die_with_parent(sig, parent):
    """Have the kernel send ``sig`` to this process when its parent exits (Linux); exit at once
    if ``parent`` is already gone."""
    libc = _libc()
    if libc is not None and hasattr(libc, "prctl"):
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def frame(obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


class Frames(asyncio.Protocol):
    """The worker's end of a handler process's socket: hands each whole frame read to
    ``on_message``; sets ``closed`` once the socket has closed."""

    def __init__(self, on_message, closed):
        self.on_message, self.closed = on_message, closed
        self.buffer = bytearray()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        buffer = self.buffer
        buffer += data
        while len(buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(buffer)
            end = HEADER.size + size
            if len(buffer) < end:
                return
            message = pickle.loads(buffer[HEADER.size : end])
            del buffer[:end]
            self.on_message(message)

    def connection_lost(self, exc):
        if not self.closed.done():
            self.closed.set_result(None)


def _read(stream, size):
    """``size`` bytes from ``stream``, an unbuffered socket file (unbuffered, so that nothing the
    worker sent waits in a buffer that ``select`` cannot see; it may give fewer bytes at once, read
    into one buffer: a frame of megabytes is not copied piece by piece)."""
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = stream.readinto(view[got:])
        if not n:
            raise EOFError
        got += n
    return buf


def _frame_from(stream):
    (size,) = HEADER.unpack(_read(stream, HEADER.size))
    return pickle.loads(_read(stream, size))


class _CancelWatch:
    """While a chunk's call runs: a thread reading the worker's ``("cancel", task id)`` frames (the
    only ones it sends before the call's reply) and marking those tasks of the chunk cancelled.
    It stops when the call ends (a byte on its own pipe), before the next frame is read."""

    def __init__(self, sock, stream, tasks):
        self.sock, self.stream = sock, stream
        self.by_id = {task.id: task for task in tasks}
        self.thread = None

    def __enter__(self):
        self.wake_r, self.wake_w = os.pipe()
        self.thread = threading.Thread(target=self._watch, name="worqr-cancel-watch", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        os.write(self.wake_w, b"x")
        self.thread.join()
        os.close(self.wake_r)
        os.close(self.wake_w)

    def _watch(self):
        while True:
            readable, _, _ = select.select([self.sock, self.wake_r], [], [])
            if self.wake_r in readable:
                return
            try:
                message = _frame_from(self.stream)
            except (EOFError, OSError):  # the worker is gone: the main loop finds that out itself
                return
            if _is_cancel(message) and message[1] in self.by_id:
                self.by_id[message[1]].set_cancelled()


def _is_cancel(message):
    return len(message) == 2 and message[0] == "cancel"


def rss_mb():
    """This process's resident memory now in MB (Linux), else its peak so far (a worker's for its
    heartbeat, an isolated handler's process's after each task)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**20 if sys.platform == "darwin" else 2**10)


class _Serving:
    task = None  # the task running now: SIGTERM marks it cancelled


class _Reports:
    """An isolated handler's ``task.progress`` and ``task.log``: frames up the socket to its
    worker, which sends them on to Redis (a lock: a handler may report from its own threads)."""

    def __init__(self, sock):
        self.sock, self.lock = sock, threading.Lock()

    def put(self, task, fraction=None, message=None, lines=None):
        data = frame(("report", fraction, message, lines, task.id))  # the id: which task of a chunk
        with self.lock:
            self.sock.sendall(data)


def serve(sock, parent, specs, child_init=None, measure_memory=False):
    """Serve tasks from ``sock`` until it closes; never returns."""
    code = 0
    try:
        die_with_parent(signal.SIGKILL, parent)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, _stop)
        if child_init is not None:
            child_init()
        stream = sock.makefile("rb", buffering=0)
        reports = _Reports(sock)
        sock.sendall(frame(("ready", os.getpid())))
        while True:
            try:
                message = _frame_from(stream)
            except EOFError:
                break
            if _is_cancel(message):  # for a chunk whose call has ended since it was sent
                continue
            queue, task, trace, start_by = message
            task.attach_sink(reports)
            if start_by is not None and time.monotonic() > start_by:  # (one clock for all processes)
                reply = ("late",)
            elif isinstance(task, list):  # a chunk's tasks: told of cancels while the call runs
                with tracing.attached_carried(trace), _CancelWatch(sock, stream, task):
                    reply = _run(specs[queue], task)
            else:
                with tracing.attached_carried(trace):  # the worker's run span, current here too
                    reply = _run(specs[queue], task)
            _flush()
            sock.sendall(frame((*reply, rss_mb() if measure_memory else 0.0)))
    except Stopped:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # end by the signal we were sent, as asked
        _flush()
        os.kill(os.getpid(), signal.SIGTERM)
        code = 1
    except ConnectionError:  # the worker is gone, or closed our socket
        code = 1
    except BaseException:  # a broken initializer: say why, then go
        traceback.print_exc()
        code = 1
    _flush()
    os._exit(code)


def _stop(signum, frame):
    if _Serving.task is not None:
        _Serving.task.set_cancelled()
    raise Stopped()


def _run(spec, task):
    _Serving.task = task
    try:
        value = spec.func(task)
    except Stopped:
        raise
    except ChunkFailed as exc:  # a chunk handler's: each task named fails with its own error
        return ("chunk", {task_id: _failure(e) for task_id, e in exc.failures.items()})
    except BaseException as exc:  # as on a thread: SystemExit from a handler is a failed attempt
        return _failure(exc)
    finally:
        _Serving.task = None
    not_run = returned_coroutine(value)
    if not_run is not None:
        return _failure(not_run)
    if value is None or not spec.keep_result:
        return ("ok", None)
    try:
        return ("ok", result_value(value))  # the worker encodes it and checks its size
    except TypeError as exc:  # its str() raised: a failed attempt, as in the worker
        return _failure(exc)


def _failure(exc):
    """A failed attempt as the worker rebuilds it (``procpool._failure``): a RetryLater (or
    RateLimited) keeps its kind and delay, anything else is described."""
    if isinstance(exc, RetryLater):
        return ("limited" if isinstance(exc, RateLimited) else "retry", exc.seconds, str(exc))
    return ("error", *_described(exc))


def _described(exc):
    """(text, traceback) of an exception, as the worker reports a failed attempt."""
    return describe(exc), "".join(traceback.format_exception(exc))[-20000:]


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # best effort: a closed stream loses nothing of ours
            pass
