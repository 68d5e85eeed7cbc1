"""Supervisor: runs N worker processes (``worker --processes N``) and keeps them running.

1. Forks each worker from this process (everything is imported and set up here already), named
   ``<name>-<i>`` (i from 1). A worker ignores SIGINT (a Ctrl-C reaches the whole process group;
   the supervisor passes it on, once) and gets SIGTERM if the supervisor dies. SIGTERM is blocked
   in a worker until its event loop handles it (``Worker.main`` unblocks it): one sent while it
   starts waits for that, instead of killing it ("exited (signal 15)", supervisor exit 1).
2. A worker that exits while the supervisor runs is started again under the same name: at once
   the first time (or after it ran for a minute), then after 1 s, 2 s, 4 s ... up to 30 s. Its tasks are
   recovered as for any dead worker (by its successor's registration or the others' heartbeats).
3. SIGTERM/SIGINT: SIGTERM to every worker, which stops taking work and lets its tasks finish
   within its grace; a second signal is passed on too (a fast stop). A worker still there well
   after its grace is killed. Exits 0 once every worker has exited 0, else 1.

The supervisor holds no task and opens no Redis connection: it only forks, signals and waits.
"""

import logging
import os
import signal
import sys
import time

from .. import keys
from ..backoff import Backoff
from .child import die_with_parent

log = logging.getLogger("worqr.worker")

_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}
#: A worker that ran this long before exiting is started again at once.
STABLE_AFTER = 60.0


class Supervisor:
    def __init__(self, count, name, start_worker, *, grace, kill_grace=5.0):
        """``start_worker(name)`` runs in each forked worker process and returns its exit code."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError("the number of worker processes must be an integer >= 1")
        self.names = {i: keys.check_worker_name(f"{name}-{i}") for i in range(1, count + 1)}
        self.start_worker = start_worker
        self.grace, self.kill_grace = grace, kill_grace
        self.pids = {}  # slot -> pid of its live worker
        self.started = {}  # slot -> when its worker started
        # slot -> its restart backoff: at once, then 1 s doubling to 30 s
        self.backoffs = {slot: Backoff(1.0, 30.0, immediate=True) for slot in self.names}
        self.due = {}  # slot -> when its worker is to be started again
        self.stops = 0  # stop signals received
        self.deadline = None  # when workers still there get SIGKILL
        self.failed = False

    def run(self):
        """Supervise until every worker has stopped after a stop signal; returns the exit code."""
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            log.info("worqr: supervisor %s starting %d worker(s)", os.getpid(), len(self.names))
            for slot in self.names:
                self._start(slot, mask)
            while self.pids or (not self.stops and self.due):
                info = signal.sigtimedwait(_SIGNALS, self._timeout())
                if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT):
                    self._stop_signal()
                self._reap()
                self._restart_due(mask)
                if self.deadline is not None and time.monotonic() > self.deadline:
                    for slot, pid in self.pids.items():
                        log.error("worqr: worker %s did not stop in time; killing it", self.names[slot])
                        _signal(pid, signal.SIGKILL)
                    self.deadline = None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        log.info("worqr: supervisor %s stopped", os.getpid())
        return 1 if self.failed else 0

    def _timeout(self):
        ahead = [t for t in [*self.due.values(), self.deadline] if t is not None]
        # at most a minute: a deadline far off (a --grace of 1e300) is past what sigtimedwait takes
        return max(0.0, min(60.0, min(ahead) - time.monotonic())) if ahead else 60.0

    def _start(self, slot, mask):
        name = self.names[slot]
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                # SIGTERM stays blocked (pending, not lost nor fatal) until the worker's event
                # loop handles it: a stop at once after a start then stops it as any stop does.
                signal.pthread_sigmask(signal.SIG_SETMASK, {*mask, signal.SIGTERM})
                die_with_parent(signal.SIGTERM, parent)
                code = self.start_worker(name)
            except BaseException:
                log.exception("worqr: worker %s failed", name)
            finally:
                logging.shutdown()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code or 0)
        self.pids[slot], self.started[slot] = pid, time.monotonic()
        log.info("worqr: started worker %s (pid %d)", name, pid)

    def _stop_signal(self):
        self.stops += 1
        self.due.clear()
        if self.stops == 1:
            log.info("worqr: supervisor stopping %d worker(s) (grace %.0f s)", len(self.pids), self.grace)
            self.deadline = time.monotonic() + self.grace + self.kill_grace + 10
        else:
            log.warning("worqr: second stop signal: workers give their tasks back now")
            self.deadline = time.monotonic() + self.kill_grace + 10
        for pid in self.pids.values():
            _signal(pid, signal.SIGTERM)

    def _reap(self):
        while self.pids:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = next((s for s, p in self.pids.items() if p == pid), None)
            if slot is None:
                continue
            del self.pids[slot]
            code = os.waitstatus_to_exitcode(status)
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            if self.stops:
                self.failed = self.failed or code != 0
                (log.info if code == 0 else log.error)("worqr: worker %s exited (%s)", self.names[slot], how)
                continue
            ran = time.monotonic() - self.started[slot]
            if ran >= STABLE_AFTER:
                self.backoffs[slot].reset()
            delay = self.backoffs[slot].next()
            log.error(
                "worqr: worker %s exited (%s) after %.0f s; starting it again in %.0f s",
                self.names[slot],
                how,
                ran,
                delay,
            )
            self.due[slot] = time.monotonic() + delay

    def _restart_due(self, mask):
        now = time.monotonic()
        for slot in [s for s, t in self.due.items() if t <= now]:
            del self.due[slot]
            self._start(slot, mask)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
