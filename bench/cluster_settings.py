"""Django settings for bench/cluster.py's workers: the project's settings plus no-op handlers for
the queues cq0 ... cq7 (bench.cluster_tasks). WORQR_REDIS_URL says where Redis is."""

import os

from worqr_site.settings import *  # noqa: F401,F403
from worqr_site.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.cluster_tasks"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("WORQR_BENCH_DB", ":memory:")}}
