"""django-tasks' database backend tests (django-tasks-db 0.13.0's ``tests/tests.py``: BSD-3-Clause,
Copyright (c) Jake Howard and individual contributors; downloaded from PyPI, not copied here),
run against WorqrBackend, with worqr's worker where theirs runs ``db_worker``: see tests/conformance.

Of its test cases, the two of the backend and its worker; the others test the database backend's
own row locks, transactions, pruning command, worker process, admin and ordering index."""

from queues.backends import WorqrBackend
from tests import conformance
from tests.conformance import backend_settings, differs, mark, not_the_backend, skip_if_using
from tests.conformance import tasks as test_tasks

UPSTREAM = conformance.load(
    conformance.upstream("django-tasks-db", "0.13.0", "tests/tests.py"),
    "tests.conformance.upstream_db",
    # exclusive_transaction decorates a test of the database backend's row locks (not run here)
    {"DatabaseBackend": WorqrBackend, "test_tasks": test_tasks, "exclusive_transaction": lambda: lambda test: test},
    {"django_tasks_db.DatabaseBackend": "queues.backends.WorqrBackend"},
)

#: What only the database backend has: its model, its SQL, its worker command and its options.
ITS_OWN = ("DBTaskResult", "assertNumQueries", "get_task_count_in_new_connection", "db_worker", "ID_FUNCTION")


@backend_settings("default", "queue-1")
class DatabaseBackendTestCase(conformance.WorqrCase, UPSTREAM.DatabaseBackendTestCase):
    pass


@backend_settings("default", "queue-1")
class DatabaseBackendWorkerTestCase(conformance.WorqrCase, UPSTREAM.DatabaseBackendWorkerTestCase):
    def run_worker(self, **options):
        conformance.drain(conformance.default_task_backend)


skip_if_using(DatabaseBackendTestCase, ITS_OWN, "the database backend's own model, SQL, command or options")
skip_if_using(DatabaseBackendWorkerTestCase, ITS_OWN, "the database backend's own model, SQL, command or options")
mark(
    DatabaseBackendTestCase,
    {
        "test_enqueue_task_async": differs("Result ids are worqr task ids", "uuid.UUID(result.id) fails"),
        "test_custom_id_function": not_the_backend("the database backend's ID_FUNCTION option"),
        "test_unknown_id_function": not_the_backend("the database backend's ID_FUNCTION option"),
        "test_postgres_id_function_expression": not_the_backend("the database backend's ID_FUNCTION option"),
        "test_database_backend_app_missing": not_the_backend("the check for the database backend's app"),
    },
)
mark(
    DatabaseBackendWorkerTestCase,
    {
        "test_complex_return_value": differs(
            "Return values must be JSON too", "the framework's normalize_json fails it ('Unsupported type')"
        ),
        "test_max_tasks": not_the_backend("db_worker's --max-tasks"),
        "test_verbose_logging": not_the_backend("db_worker's own log lines"),
    },
)
