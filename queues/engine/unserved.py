"""A warning for tasks sent to a queue that no worker has ever served: a misspelt queue name
would otherwise be silent for ever, its tasks waiting.

The first enqueue of each queue in a process asks Redis once whether a worker ever registered
for the queue (one ``HEXISTS`` of the field ``lt`` that ``register`` keeps in the queue's
``meta``, as the ``counts`` script's ``served`` does; on the enqueue client and its short
timeouts), then never again in that process: the answer is kept per queue, and a queue found
unserved is warned about once. A failed check (Redis unreachable) is not kept: the next enqueue
asks again. Each ``Sending`` reports its queue here once its first call went in.
"""

import logging
import threading

from . import keys
from .connection import NETWORK_ERRORS

log = logging.getLogger("worqr")

_checked = set()  # queues asked about in this process (served, or warned about)
_lock = threading.Lock()


def check(connection, queue):
    """Warn once per process if no worker has ever served ``queue``."""
    if queue in _checked:
        return
    with _lock:
        if queue in _checked:
            return
        _checked.add(queue)
    try:
        served = connection.enqueue_client.hexists(keys.queue_key(queue, "meta"), "lt")
    except NETWORK_ERRORS:
        _checked.discard(queue)  # asked again by the next enqueue
        return
    if not served:
        log.warning(
            "worqr: queue %s: no worker has ever served this queue; its tasks wait until one does "
            "(manage.py worker %s). Is the name misspelt?",
            queue,
            queue,
        )


def forget():
    """Forget every answer (tests: a new Redis, a new story)."""
    with _lock:
        _checked.clear()
