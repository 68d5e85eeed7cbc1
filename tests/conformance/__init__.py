"""The Tasks framework's own backend tests, run against ``WorqrBackend`` with a real worker.

The tests are not copied here: each ``tests/test_conformance_*.py`` names an upstream test file
inside a source distribution on PyPI (Django's ``tests/tasks/``, the django-tasks database and RQ
backends' ``tests/tests.py``), which ``upstream()`` downloads once with pip into the git-ignored
``var/conformance/`` and ``load()`` executes unchanged but for the wiring:

- its imports of the framework (``django.tasks`` or the ``django_tasks`` backport, whichever this
  Django has), of the backend under test (RQ, the database backend), of any library not
  installed here (an in-memory stand-in for Redis the upstream tests use is never loaded: the
  session's real redis-server serves every test) and of its own
  ``tests`` package are left out, and the names they bound are given instead: the framework's
  from ``FRAMEWORK``, the test tasks from ``tests/conformance/tasks.py`` (or Django's own, for
  Django's tests), the backend's class as ``WorqrBackend``;
- the strings that name its backend class or the framework's logger name worqr's instead;
- type hints are dropped (they may name what was left out).

The test module then subclasses each upstream test case, overriding only how a worker is run
(``drain``: worqr's own ``Worker``, in a thread of the test process like the RQ tests'
``SimpleWorker``, until the backend's queues are empty) and how the store is emptied. Each
upstream test is then either run as it is, expected to fail (``differs``: a difference
docs/tasks-backend.md documents, named by its line) or skipped (``not_the_backend``: it checks
the other backend's own storage, command or library, which has no counterpart here).
"""

import ast
import contextlib
import fcntl
import functools
import importlib.util
import inspect
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest
from django.test import override_settings

from queues.backends import framework
from queues.conf import get_connection
from queues.engine import readmodel, registry
from queues.engine.worker import Worker
from tests.conftest import ROOT

CACHE = ROOT / "var" / "conformance"
DOCS = "docs/tasks-backend.md"

#: The framework's names the upstream tests import, from whichever framework this Django has.
try:  # Django 6
    from django.tasks import DEFAULT_TASK_QUEUE_NAME, default_task_backend, task
    from django.tasks.backends.dummy import DummyBackend
    from django.tasks.backends.immediate import ImmediateBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY
    from django.tasks.exceptions import InvalidTaskBackend, TaskResultMismatch
except ImportError:  # Django 5.2: the backport
    from django_tasks import DEFAULT_TASK_QUEUE_NAME, default_task_backend, task
    from django_tasks.backends.dummy import DummyBackend
    from django_tasks.backends.immediate import ImmediateBackend
    from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
    from django_tasks.exceptions import TaskResultMismatch

FRAMEWORK = {
    "DEFAULT_TASK_QUEUE_NAME": DEFAULT_TASK_QUEUE_NAME,
    "TASK_MAX_PRIORITY": TASK_MAX_PRIORITY,
    "TASK_MIN_PRIORITY": TASK_MIN_PRIORITY,
    "DummyBackend": DummyBackend,
    "ImmediateBackend": ImmediateBackend,
    "InvalidTask": framework.InvalidTaskError,
    "InvalidTaskError": framework.InvalidTaskError,
    "InvalidTaskBackend": InvalidTaskBackend,
    "Task": framework.Task,
    "TaskContext": framework.TaskContext,
    "TaskResult": framework.TaskResult,
    "TaskResultDoesNotExist": framework.TaskResultDoesNotExist,
    "TaskResultMismatch": TaskResultMismatch,
    "TaskResultStatus": framework.TaskResultStatus,
    "default_task_backend": default_task_backend,
    "task": task,
    "task_backends": framework.task_backends,
    "task_enqueued": framework.task_enqueued,
    "task_finished": framework.task_finished,
    "task_started": framework.task_started,
}

#: Imports left out (the framework, the backends under test and their libraries, their tests).
LEFT_OUT = (
    "django.tasks",
    "django_tasks",
    "django_tasks_db",
    "django_tasks_rq",
    "django_rq",
    "rq",
    "tests",
)


def _installed(name):
    """Whether the top-level package of the import ``name`` is installed here."""
    return importlib.util.find_spec(name.partition(".")[0]) is not None


def upstream(dist, version, member):
    """The path of ``member`` in the sdist ``dist==version`` from PyPI (downloaded once)."""
    folder = CACHE / f"{dist}-{version}"
    path = folder / member
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    # Several pytest processes (make test's xdist workers) may ask at once: one fetches, the
    # others wait on the lock and find it there.
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            _fetch(dist, version, member, folder)
    return path


def _fetch(dist, version, member, folder):
    download = CACHE / f"download-{os.getpid()}"
    shutil.rmtree(download, ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        + ["--python-version", "3.12", "--dest", str(download), f"{dist}=={version}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"pip download {dist}=={version} failed:\n{done.stderr}"
    name = dist.replace("-", "_").lower()
    archive = next(p for p in download.iterdir() if p.name.lower().startswith(f"{name}-{version}".lower()))
    tmp = CACHE / f".{dist}-{version}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(archive) as tar:
        prefix = tar.getnames()[0].split("/")[0]
        wanted = [m for m in tar.getmembers() if m.name.startswith(f"{prefix}/{Path(member).parent}/")]
        wanted += [m for m in tar.getmembers() if m.name in (f"{prefix}/LICENSE", f"{prefix}/LICENSE.txt")]
        tar.extractall(tmp, members=wanted, filter="data")
    (tmp / prefix).rename(folder)  # whole or not at all
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(download, ignore_errors=True)


class _Wiring(ast.NodeTransformer):
    def __init__(self, strings):
        self.strings = strings

    def visit_Module(self, node):
        node.body = [n for n in node.body if not self._left_out(n)]  # top level only: a try/except
        return self.generic_visit(node)  # import choosing between two frameworks chooses itself

    def visit_FunctionDef(self, node):  # type hints may name what was left out: dropped
        node.returns = None
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]:
            if arg is not None:
                arg.annotation = None
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node):
        if node.value is None:
            return None
        return ast.copy_location(ast.Assign(targets=[node.target], value=self.visit(node.value)), node)

    def visit_Constant(self, node):
        if isinstance(node.value, str) and node.value in self.strings:
            return ast.copy_location(ast.Constant(self.strings[node.value]), node)
        return node

    @staticmethod
    def _left_out(node):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else ["tests"]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            return False
        listed = any(n == top or n.startswith(top + ".") for n in names for top in LEFT_OUT)
        return listed or not all(_installed(n) for n in names if n)


def load(path, module_name, names, strings=None):
    """Execute the upstream file ``path`` as the module ``module_name``, wired (see above)."""
    strings = {"django_tasks": framework.LOGGER_NAME, **(strings or {})}
    tree = ast.fix_missing_locations(_Wiring(strings).visit(ast.parse(path.read_text(), str(path))))
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    module.__dict__.update(FRAMEWORK)
    module.__dict__.update(names)
    sys.modules[module_name] = module  # its tasks are found by module path, as a worker finds them
    exec(compile(tree, str(path), "exec"), module.__dict__)
    return module


def drain(backend, timeout=30.0):
    """Run a worqr ``Worker`` on the backend's queues until nothing is left to run in them."""
    conn = get_connection()
    worker = Worker(sorted(backend.queues), conn, concurrency=1, name=f"conformance-{time.time_ns()}", grace=1.0)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counts = [readmodel.queue_counts(conn.client, q) for q in backend.queues]
            if not any(c["runnable"] or c["active"] or c["waiting"] for c in counts):
                break
            time.sleep(0.02)
        else:
            pytest.fail(f"the worker did not drain {sorted(backend.queues)} in {timeout} s")
    finally:
        while not hasattr(worker, "loop"):
            time.sleep(0.01)
        worker.loop.call_soon_threadsafe(worker.request_stop)
        thread.join(30)
    assert not thread.is_alive() and worker.error is None, worker.error


class WorqrCase:
    """Mixed into each upstream test case: worqr's backend for TASKS, its queues' handlers put
    back as they were after the case (the backend registers them when it is made)."""

    @classmethod
    def setUpClass(cls):
        cls._handlers = dict(registry._handlers)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        registry._handlers.clear()
        registry._handlers.update(cls._handlers)

    def run_worker(self):
        drain(default_task_backend)


def backend_settings(*queues, **options):
    """``override_settings`` of TASKS["default"]: a WorqrBackend on ``queues``."""
    params = {"BACKEND": "queues.backends.WorqrBackend", "QUEUES": list(queues)}
    if options:
        params["OPTIONS"] = options
    return override_settings(TASKS={"default": params})


def differs(doc_text, why):
    """An expected failure: worqr answers otherwise, as the line of docs/tasks-backend.md that
    holds ``doc_text`` says (found now, so the reason names its current line number)."""
    lines = (ROOT / DOCS).read_text().splitlines()
    found = [i for i, line in enumerate(lines, 1) if doc_text in line]
    assert len(found) == 1, f"{DOCS} should hold {doc_text!r} on one line, found on {found}"
    xfail = pytest.mark.xfail(strict=True, reason=f"{DOCS}:{found[0]} ({doc_text}): {why}")

    def apply(method):
        # subTest() failures are reported apart from the test, which xfail can't see: run them inline
        if inspect.iscoroutinefunction(method):

            @functools.wraps(method)
            async def inline(self, *args, **kwargs):
                self.subTest = _no_subtest
                return await method(self, *args, **kwargs)
        else:

            @functools.wraps(method)
            def inline(self, *args, **kwargs):
                self.subTest = _no_subtest
                return method(self, *args, **kwargs)

        return xfail(inline)

    return apply


def _no_subtest(*args, **kwargs):
    return contextlib.nullcontext()


def not_the_backend(why):
    """A skip: the upstream test checks its own backend's storage, command or library."""
    return pytest.mark.skip(reason=f"not the backend contract: {why}")


def skip_if_using(case, names, why):
    """Skip each test of ``case`` (defined upstream) whose code uses one of ``names``: the other
    backend's own models, commands or options, which worqr has no counterpart of."""
    for name in dir(case):
        method = getattr(case, name)
        if not name.startswith("test") or not callable(method):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        used |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        found = sorted(used & set(names))
        if found:
            setattr(case, name, not_the_backend(f"{why} ({', '.join(found)})")(method))
    return case


def mark(case, marks):
    """``case`` with ``marks`` ({test name: mark}) applied to its inherited tests."""
    for name, marker in marks.items():
        method = getattr(case, name)  # an AttributeError names a test upstream no longer has
        setattr(case, name, marker(method))
    return case
