"""django-tasks' RQ backend tests (django-tasks-rq 0.12.0's ``tests/tests.py``: BSD-3-Clause,
Copyright (c) Jake Howard and individual contributors; downloaded from PyPI, not copied here),
run against WorqrBackend, with worqr's worker where theirs runs RQ's: see tests/conformance."""

from django.test import SimpleTestCase

from queues.backends import WorqrBackend
from tests import conformance
from tests.conformance import backend_settings, mark, not_the_backend
from tests.conformance import tasks as test_tasks

UPSTREAM = conformance.load(
    conformance.upstream("django-tasks-rq", "0.12.0", "tests/tests.py"),
    "tests.conformance.upstream_rq",
    {"RQBackend": WorqrBackend, "test_tasks": test_tasks},
    {"django_tasks_rq.RQBackend": "queues.backends.WorqrBackend"},
)


@backend_settings("default", "queue-1")
class RQBackendTestCase(conformance.WorqrCase, UPSTREAM.RQBackendTestCase):
    def setUp(self):
        SimpleTestCase.setUp(self)  # theirs points django_rq at an in-memory stand-in; the session's Redis is real


mark(
    RQBackendTestCase,
    {
        "test_invalid_task_path": not_the_backend("it enqueues an RQ job with django_rq"),
        "test_rq_app_missing": not_the_backend("the django_rq app check"),
        "test_queue_isolation": not_the_backend("it reads RQ's job lists"),
        "test_uses_rq_queues_for_queue_names": not_the_backend("QUEUES from RQ_QUEUES"),
        "test_unknown_queue_name": not_the_backend("a queue missing from RQ_QUEUES"),
        "test_exception_classes_pop_empty_list_bug": not_the_backend("RQ job meta"),
        "test_complex_return_value": not_the_backend("RQ's unserializable-value payload"),
    },
)
