"""Test settings: the project's, with the test handlers instead of the demo's, and fast timings."""

import os
from importlib.util import find_spec

from worqr_site.settings import *  # noqa: F403

INSTALLED_APPS = [a for a in INSTALLED_APPS if a != "sample"] + ["tests.testapp"]  # noqa: F405
# The Tasks framework backend's tests; on Django 5.2 the framework is the django-tasks backport's
# app (Django 6 has it built in, as django.tasks, and no backport is installed).
INSTALLED_APPS += ([] if find_spec("django.tasks") else ["django_tasks"]) + ["tests.tasksapp"]

# One SQLite file per test session (sessions may run side by side); worker and server processes
# that the session starts inherit the variable, so they share the session's database.
# Under pytest-xdist each worker is a session of its own: it inherits the controller's names, so
# it makes its own once (the processes it starts inherit those, with the same worker id).
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _xdist_worker and _xdist_worker != os.environ.get("WORQR_TEST_DB_WORKER"):
    os.environ["WORQR_TEST_DB_WORKER"] = _xdist_worker
    os.environ.pop("WORQR_TEST_DB", None)
    os.environ.pop("WORQR_TEST_PG_DB", None)
os.environ.setdefault("WORQR_TEST_DB", f"/tmp/worqr-test-{os.getpid()}.sqlite3")

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["WORQR_TEST_DB"],
        "TEST": {"NAME": os.environ["WORQR_TEST_DB"]},
        "OPTIONS": SQLITE_OPTIONS,  # noqa: F405 (the project's: WAL, IMMEDIATE transactions, a busy timeout)
    }
}

# PostgreSQL, as the alias "pg" (the outbox's tests run on it too: tests/test_outbox.py): its
# test database is made only for a session that runs a test asking for it, named per session
# like the SQLite file, so sessions side by side never share one. WORQR_TEST_PG_HOST/USER/PORT
# point elsewhere than the local server (trust auth).
try:
    import psycopg  # noqa: F401

    os.environ.setdefault("WORQR_TEST_PG_DB", f"worqr_test_{os.getpid()}")
    DATABASES["pg"] = {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ.get("WORQR_TEST_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("WORQR_TEST_PG_PORT", "5432"),
        "USER": os.environ.get("WORQR_TEST_PG_USER", "postgres"),
        "NAME": os.environ["WORQR_TEST_PG_DB"],
        "TEST": {"NAME": os.environ["WORQR_TEST_PG_DB"]},
    }
except ImportError:
    pass

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

WORQR = {
    # The test session starts its own redis-server and exports its URL before Django starts.
    "REDIS_URL": os.environ.get("WORQR_REDIS_URL", ""),
    "TIMEOUT_GRACE": float(os.environ.get("WORQR_TEST_TIMEOUT_GRACE", "2")),
    "BACKOFF": 0.2,
    "KILL_GRACE": float(os.environ.get("WORQR_TEST_KILL_GRACE", "5")),
    "HEARTBEAT_TTL": float(os.environ.get("WORQR_TEST_HEARTBEAT_TTL", "3")),
    "MAX_RESULT_BYTES": int(os.environ.get("WORQR_TEST_MAX_RESULT_BYTES", str(16 * 1024 * 1024))),
    # The failover tests (tests/test_failover.py) run workers with replicated acknowledgements.
    "MIN_REPLICAS_ACK": int(os.environ.get("WORQR_TEST_MIN_REPLICAS_ACK", "0")),
    # Webhooks: off unless a test turns them on (tests/test_webhooks.py sets these variables for
    # its worker processes and overrides the setting in-process), so workers keep refusing
    # queues without a handler elsewhere.
    "CALLBACK_ALLOWED_HOSTS": [h for h in os.environ.get("WORQR_TEST_CALLBACK_HOSTS", "").split(",") if h],
    "CALLBACK_TIMEOUT": float(os.environ.get("WORQR_TEST_CALLBACK_TIMEOUT", "10")),
    # The databases whose outbox the workers' relay watches: the PostgreSQL one only when a test
    # made it (it sets the variable for its workers).
    "OUTBOX_DATABASES": os.environ.get("WORQR_TEST_OUTBOX_DATABASES", "default").split(","),
    # Encrypted payloads: none unless a test sets these for its worker processes
    # (tests/test_encryption_workers.py).
    "ENCRYPTION_KEYS": [k for k in os.environ.get("WORQR_TEST_ENCRYPTION_KEYS", "").split(",") if k],
    "ENCRYPTED_QUEUES": [q for q in os.environ.get("WORQR_TEST_ENCRYPTED_QUEUES", "").split(",") if q],
}

# The Tasks framework backend (tests/test_tasks_backend.py, functions in tests/tasksapp/tasks.py).
TASKS = {
    "default": {"BACKEND": "queues.backends.WorqrBackend", "QUEUES": ["dt-default", "dt-emails"]},
    "retrying": {
        "BACKEND": "queues.backends.WorqrBackend",
        "QUEUES": ["dt-retry"],
        "OPTIONS": {"RETRIES": 2, "BACKOFF": 0.05},
    },
}
