"""Settings for ``bench/dashboard.py --live``: the project's settings (its database
in a temporary file, ``WORQR_DB_PATH``) plus a no-op ``async`` handler on the queue
``bench-live``, registered here so the bench's worker process has it too."""

from queues.engine import handler
from worqr_site.settings import *  # noqa: F401,F403

BENCH_QUEUE = "bench-live"


@handler(BENCH_QUEUE)
async def _noop(task):
    return None
