"""Django settings for worqr's benchmark workers: the project's settings plus the no-op handler.

Used as DJANGO_SETTINGS_MODULE=bench.worqr_settings by adapters/worqr_adapter.py (and scale.py);
the Redis URL comes from WORQR_REDIS_URL, as in the project's own settings.
"""

import os

from worqr_site.settings import *  # noqa: F401,F403
from worqr_site.settings import INSTALLED_APPS, WORQR

INSTALLED_APPS = [*INSTALLED_APPS, "bench.worqr_tasks"]

# Workers never need the project's database for this benchmark, but Django wants one: a private
# in-memory SQLite keeps var/db.sqlite3 (the demo's) out of it. scale.py overrides it with a file.
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("WORQR_BENCH_DB", ":memory:")}}

# bench/future.py's encryption probe: a queue with encrypted payloads, once worqr has them.
if os.environ.get("WORQR_BENCH_ENCRYPTED_QUEUES"):
    WORQR = {
        **WORQR,
        "ENCRYPTION_KEYS": [os.environ["WORQR_BENCH_ENCRYPTION_KEY"]],
        "ENCRYPTED_QUEUES": os.environ["WORQR_BENCH_ENCRYPTED_QUEUES"].split(","),
    }

# The benchmark's tasks never go through the outbox, and its database is never migrated: the
# workers' relay would only log "no such table" (scale.py's idle worker is measured with the
# relay on; it reads nothing from a migrated database either).
if not os.environ.get("WORQR_BENCH_RELAY"):
    WORQR = {**WORQR, "OUTBOX_DATABASES": []}
