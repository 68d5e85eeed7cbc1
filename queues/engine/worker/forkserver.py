"""The fork server: forks isolated handlers' processes from a clean copy of the worker.

A worker forks it once, before its event loop and threads start (``start``): the server is a
single-threaded copy of the worker with everything imported and set up (Django included) and no
Redis connection in use. Each handler process is forked from the server, not from the busy
worker, so it starts in milliseconds (a fork measured 8 ms here, against 1.1 s to start a new
interpreter and set Django up) and can't inherit a lock held by one of the worker's threads, its
event loop or its connections.

1. ``fork(number)`` sends the server one end of a new socket pair; the server forks a process
   that serves tasks on it (``child.serve``) and closes its own copy.
2. The server reaps its children and reports each exit as (number, exit code), the code negative
   for a signal (``os.waitstatus_to_exitcode``): ``exits()`` reads the reports.
3. The server exits when the worker closes its socket, or is killed when the worker dies
   (PR_SET_PDEATHSIG); its children are killed when it exits, the same way.
"""

import os
import select
import signal
import socket
import struct
import traceback

from . import child

_REQUEST = struct.Struct("!I")
_EXIT = struct.Struct("!Ii")


class ForkServer:
    def __init__(self, specs, child_init=None, measure_memory=False):
        self.serve_args = (specs, child_init, measure_memory)
        self.sock = None
        self.pid = None

    def start(self):
        """Fork the server now: call it before any thread or event loop of the worker starts."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            ours.close()
            _serve(theirs, parent, self.serve_args)
        theirs.close()
        self.sock, self.pid = ours, pid

    def fileno(self):
        return self.sock.fileno()

    def fork(self, number):
        """Ask for a new handler process; returns the worker's end of its socket."""
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self.sock, [_REQUEST.pack(number)], [theirs.fileno()])
        finally:
            theirs.close()
        return ours

    def exits(self):
        """The exit reports waiting now, as [(number, code)]; None once the server is gone."""
        out = []
        while True:
            try:
                msg = self.sock.recv(64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return out
            except OSError:
                return None
            if not msg:
                return None
            out.append(_EXIT.unpack(msg))

    def close(self):
        """Stop the server (its children die with it) and reap it."""
        if self.sock is None:
            return
        self.sock.close()
        self.sock = None
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _serve(sock, parent, serve_args):
    """The server's loop (in the forked server process); never returns."""
    try:
        child.die_with_parent(signal.SIGKILL, parent)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # blocked in a supervisor's starting worker
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up fd does the work
        signal.set_wakeup_fd(wake_w)
        me, numbers = os.getpid(), {}
        while True:
            ready, _, _ = select.select([sock, wake_r], [], [])
            if wake_r in ready:
                _drain(wake_r)
                _reap(sock, numbers)
            if sock in ready:
                try:
                    msg, fds, _, _ = socket.recv_fds(sock, 64, 1)
                except ConnectionError:
                    break  # the worker is gone
                if not msg:
                    break
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    os.close(wake_r)
                    os.close(wake_w)
                    sock.close()
                    child.serve(socket.socket(fileno=fds[0]), me, *serve_args)
                os.close(fds[0])
                numbers[pid] = _REQUEST.unpack(msg)[0]
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def _drain(fd):
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _reap(sock, numbers):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        number = numbers.pop(pid, None)
        if number is not None:
            sock.send(_EXIT.pack(number, os.waitstatus_to_exitcode(status)))
