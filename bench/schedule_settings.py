"""Django settings for bench/schedules.py's workers: the benchmark's settings plus
``WORQR_BENCH_SCHEDULES`` schedules ``lat-0`` ... firing every second into the queue "lateness",
which no worker serves (their runs stay pending, so their enqueue times can be read)."""

import os

from bench.worqr_settings import *  # noqa: F401,F403

WORQR = {
    "REDIS_URL": os.environ["WORQR_REDIS_URL"],
    "OUTBOX_DATABASES": [],  # as bench/worqr_settings.py: no outbox, no migrated database
    "SCHEDULES": {
        f"lat-{i}": {"queue": "lateness", "every": 1, "payload": str(i)}
        for i in range(int(os.environ.get("WORQR_BENCH_SCHEDULES", "10")))
    },
}
