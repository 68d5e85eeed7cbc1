"""Django's own Tasks framework tests (Django 6.1.3's ``tests/tasks/test_tasks.py``: BSD-3-Clause,
Copyright (c) Django Software Foundation and individual contributors; downloaded from PyPI, not
copied here), run with WorqrBackend as the default backend: see tests/conformance.

Of Django's ``tests/tasks/``, the file whose tests reach a backend through the public API
(enqueue, results, ``using()``, validation); the others test the dummy and immediate backends
themselves and a custom backend class. Tests of the dummy backend's own store (``results``,
``clear()``) are skipped."""

import sys
import types
from importlib.util import find_spec

import pytest
from django.test import SimpleTestCase, override_settings

from tests import conformance
from tests.conformance import differs, mark, skip_if_using

# Django 6.1's tests of Django 6.1's framework: on Django 5.2 the framework is the backport, whose
# pickling, logging and errors differ from Django's (the RQ and database backend tests run on both).
if not find_spec("django.tasks"):
    pytest.skip("Django 6.1's own tests of its framework: this is Django 5.2", allow_module_level=True)

DJANGO = "Django", "6.1.3"
# Their tasks module is tests/tasks/tasks.py, run as "tasks.tasks" (module paths and pickles name it)
sys.modules.setdefault("tasks", types.ModuleType("tasks")).__path__ = []
with conformance.backend_settings("default", "queue_1"):  # the backend their tasks are made for
    TASKS_MODULE = conformance.load(conformance.upstream(*DJANGO, "tests/tasks/tasks.py"), "tasks.tasks", {})
UPSTREAM = conformance.load(
    conformance.upstream(*DJANGO, "tests/tasks/test_tasks.py"),
    "tests.conformance.upstream_django",
    {"test_tasks": TASKS_MODULE},
)


@override_settings(
    TASKS={
        "default": {"BACKEND": "queues.backends.WorqrBackend", "QUEUES": ["default", "queue_1"]},
        "immediate": {"BACKEND": f"{conformance.ImmediateBackend.__module__}.ImmediateBackend", "QUEUES": []},
        "missing": {"BACKEND": "does.not.exist"},
    },
    USE_TZ=True,
)
class TaskTestCase(conformance.WorqrCase, UPSTREAM.TaskTestCase):
    def setUp(self):
        SimpleTestCase.setUp(self)  # theirs empties the dummy backend's list; the session empties Redis


skip_if_using(TaskTestCase, ("results", "clear", "DummyBackend"), "the dummy backend's own store and class")
# The test session imports Daphne (an installed app), and with it Twisted's pickling of methods
TWISTED = "Task` can't be pickled", "Twisted's copyreg entry for bound methods breaks Task.__reduce__"
mark(TaskTestCase, {"test_pickle_task": differs(*TWISTED), "test_pickle_task_result": differs(*TWISTED)})
