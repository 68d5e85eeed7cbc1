"""``WorqrBackend``: a backend for Django's Tasks framework (``django.tasks`` on Django 6, the
``django-tasks`` backport on 5.2) that runs ``@task`` functions as ordinary worqr tasks.

::

    TASKS = {"default": {"BACKEND": "queues.backends.WorqrBackend", "QUEUES": ["default", "emails"],
                         "OPTIONS": {"RETRIES": 3, "TIMEOUT": 600, "BACKOFF": 10, "ON_COMMIT": True}}}

Each name in ``QUEUES`` is a worqr queue whose handler is ``queues.backends.dispatch.run`` (registered
when the backend is made, and at startup by ``register_handlers`` so workers have it), run by
``manage.py worker default emails``. The backend:

- enqueues a JSON payload (``queues.backends.dispatch``); arguments are normalised by the framework's
  ``TaskResult`` first, so a call that is not JSON is refused with the framework's own error;
- gives the result the enqueue's time as Redis recorded it (the task's ``created_at``), so the
  result ``enqueue()`` returns equals what ``get_result()`` reads back;
- inside ``transaction.atomic()`` enqueues on commit (``ON_COMMIT``, default
  ``WORQR["TASKS_ON_COMMIT"]``, default True) through the transactional outbox
  (``queues.outbox``: enqueued if and only if the transaction commits), returning the result (and
  its id) at once, with ``enqueued_at`` None until the commit adds the task (``get_result()`` has
  nothing to read before);
- tags every task it enqueues with ``OPTIONS["TAGS"]`` (a list of strings, indexed for the
  dashboard's ``tag:`` search), if given;
- maps ``run_after`` to worqr's ``eta`` (with ``USE_TZ = False``, a naive ``run_after`` is in the
  current time zone, and the result's times are naive in it too, as Django's own); accepts and validates ``priority`` and keeps it with the
  task, but runs a queue in FIFO order: worqr's priorities are between queues (the order given
  to ``manage.py worker``), so urgent work goes to its own queue (``.using(queue_name=...)``);
- reads results from the task's Redis hash: READY (pending, delayed, waiting, or retrying),
  RUNNING, SUCCESSFUL with the return value (kept ``WORQR["RESULT_TTL"]`` seconds), FAILED with
  the errors (kept until the failed task is retried or deleted); a cancelled task, or a result
  past its TTL, no longer exists.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .. import outbox
from ..conf import get_connection, setting
from ..engine import crypto, enqueueing, keys, readmodel, text
from ..engine.errors import ConfigurationError, InvalidQueueName, InvalidTask
from ..engine.registry import handler
from ..engine.task import ms_to_datetime
from ..transactions import Queue, in_transaction
from . import dispatch
from .framework import (
    BaseTaskBackend,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)

_STATUS = {
    "pending": TaskResultStatus.READY,
    "delayed": TaskResultStatus.READY,
    "waiting": TaskResultStatus.READY,
    "blocked": TaskResultStatus.READY,
    "active": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
}


class WorqrBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True  # accepted and kept; FIFO within a queue (see the module docstring)

    def __init__(self, alias, params):
        super().__init__(alias, params)
        options = {str(k).upper(): v for k, v in (self.options or {}).items()}
        unknown = set(options) - {"RETRIES", "TIMEOUT", "BACKOFF", "ON_COMMIT", "DATABASE", "TAGS"}
        if unknown:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]['OPTIONS']: unknown {', '.join(sorted(unknown))}")
        if not self.queues:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]['QUEUES'] must name the worqr queues to use")
        self.on_commit = bool(options.get("ON_COMMIT", setting("TASKS_ON_COMMIT", True)))
        self.using = options.get("DATABASE")
        try:  # tags every task enqueued through this backend carries (indexed for search)
            tags = options.get("TAGS")  # (checked as an enqueue checks them: a lone surrogate too)
            self.tags = [text.checked("tags", t) for t in keys.check_tags(tags)] if tags is not None else None
        except InvalidTask as exc:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]['OPTIONS']['TAGS']: {exc}") from exc
        try:
            for queue in sorted(self.queues):
                handler(
                    queue,
                    retries=options.get("RETRIES"),
                    timeout=options.get("TIMEOUT"),
                    backoff=options.get("BACKOFF"),
                    keep_result=True,
                )(dispatch.run)
        except (ConfigurationError, InvalidQueueName) as exc:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]: {exc}") from exc

    # -- enqueueing ------------------------------------------------------------------------

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> TaskResult:
        self.validate_task(task)
        task_id = enqueueing.new_task_id(task.queue_name)
        result = TaskResult(  # normalises args and kwargs: raises TypeError if not JSON
            task=task,
            id=task_id,
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        payload = dispatch.encode(task, result.args, result.kwargs, self.alias)
        queue = Queue(task.queue_name)
        options = {"eta": dispatch.eta(task.run_after)} if task.run_after else {}
        # Checked now, so a bad call fails here even when the enqueue waits for the commit.
        if self.tags:
            options["tags"] = self.tags
        prepared = enqueueing.prepare(queue.connection.config, queue.name, [payload], **options)

        def enqueued(enqueued):
            # Redis's time of the enqueue, the task's "created": what get_result() reads back.
            object.__setattr__(result, "enqueued_at", dispatch.framework_time(ms_to_datetime(enqueued.now_ms)))
            task_enqueued.send(type(self), task_result=result)

        if self.on_commit and in_transaction(self.using):
            # Through the outbox: enqueued if and only if the transaction commits (until the push,
            # enqueued_at stays None).
            queue.through_outbox(outbox.entries(queue, [payload], [task_id], options), self.using, enqueued)
        else:  # the id was made here and is new: nothing to remember it for
            enqueued(enqueueing.enqueue_prepared(queue.connection, queue.name, prepared, [task_id], remember=False))
        return result

    # -- results ---------------------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult:
        queue = keys.queue_from_task_id(result_id)
        if queue is None or queue not in self.queues:
            raise TaskResultDoesNotExist(result_id)
        q = Queue(queue)
        wtask = q.get(result_id)
        if wtask is not None and isinstance(wtask.payload, crypto.Sealed):  # an encrypted queue's: opened here
            try:
                wtask.payload = crypto.open_payload(q.connection.config, wtask)
                wtask.result = crypto.open_result(q.connection.config, wtask)  # sealed as its payload
            except crypto.PayloadUnreadable:
                wtask = None
        data = dispatch.decode(wtask.payload) if wtask is not None else None
        if data is None:
            raise TaskResultDoesNotExist(result_id)
        data = dict(data, backend=self.alias)
        try:
            task = dispatch.load_task(data)
        except (ImportError, TypeError, ValueError) as exc:
            raise TaskResultDoesNotExist(f"{result_id}: {exc}") from exc
        return self._result(task, wtask, data)

    def _result(self, task, wtask, data):
        status = _STATUS.get(wtask.state, TaskResultStatus.READY)
        errors, workers = self._history(wtask) if wtask.error else ([], [])
        kept = json.loads(wtask.result) if status == TaskResultStatus.SUCCESSFUL and wtask.result else None
        if wtask.worker or kept:
            workers.append(wtask.worker or kept.get("worker", ""))
        workers = ([""] * wtask.attempt + workers)[-wtask.attempt :] if wtask.attempt else []
        attempted = dispatch.framework_time(wtask.started_at or wtask.failed_at)
        finished = dispatch.framework_time(wtask.finished_at or wtask.failed_at)
        result = TaskResult(
            task=task,
            id=wtask.id,
            status=status,
            enqueued_at=dispatch.framework_time(wtask.created_at),
            started_at=attempted,
            last_attempted_at=attempted,
            finished_at=finished if status in _DONE else None,
            args=data["args"],
            kwargs=data["kwargs"],
            backend=self.alias,
            errors=errors,
            worker_ids=workers,
        )
        if kept is not None:
            object.__setattr__(result, "_return_value", kept["value"])
        return result

    def _history(self, wtask):
        """(errors, worker names) of the task's failed attempts, oldest first, from the queue's
        failure history (the last FAILURE_HISTORY failures); at least the task's last error."""
        conn = get_connection()
        entries = [
            e
            for e in readmodel.failures(conn.client, wtask.queue, conn.config.failure_history)
            if e.get("id") == wtask.id
        ][::-1]
        if not entries or entries[-1].get("error") != wtask.error:
            entries.append({"error": wtask.error, "traceback": wtask.traceback, "worker": ""})
        errors = [dispatch.task_error(e.get("error"), e.get("traceback")) for e in entries]
        return errors, [e.get("worker") or "" for e in entries]


_DONE = (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)


def register_handlers():
    """Make every configured WorqrBackend, so its queues' handlers exist (called at startup, so
    that ``manage.py worker`` finds them)."""
    for alias, params in (getattr(settings, "TASKS", None) or {}).items():
        backend_class = import_string(params["BACKEND"])
        if isinstance(backend_class, type) and issubclass(backend_class, WorqrBackend):
            task_backends[alias]
