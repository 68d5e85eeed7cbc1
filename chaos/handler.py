"""The chaos soak's handler: sleeps the milliseconds its payload says, then appends a line
``<id> <pid> <start> <end>`` to ``$WORQR_CHAOS_DIR/runs-<pid>.log`` (one ``write`` on a file
opened for appending: a line is whole or absent, and a Redis restart cannot lose it). Imported
by the chaos app (``apps.ChaosConfig.ready``) only in processes the soak starts
(``WORQR_CHAOS_DIR`` set)."""

import os
import time

from queues import handler

from . import QUEUE

_fd = None


def _log():
    global _fd
    if _fd is None or _fd[0] != os.getpid():
        path = os.path.join(os.environ["WORQR_CHAOS_DIR"], f"runs-{os.getpid()}.log")
        _fd = (os.getpid(), os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    return _fd[1]


@handler(QUEUE)
def run(task):
    start = time.time()
    time.sleep(int(task.payload or 0) / 1000)
    os.write(_log(), f"{task.id} {os.getpid()} {start:.6f} {time.time():.6f}\n".encode())
