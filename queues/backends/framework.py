"""The Tasks framework's names, from ``django.tasks`` (Django 6+) or the ``django-tasks`` backport.

Everything worqr uses of the framework comes through here, so the two spellings meet once.
"""

try:  # Django 6.0+
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    LOGGER_NAME = "django.tasks"  # the framework logs "enqueued", "started", "finished" lines here
except ImportError:  # Django 5.2 with the django-tasks backport
    try:
        from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskError
        from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
        from django_tasks.utils import normalize_json
    except ImportError as exc:
        raise ImportError(
            "worqr's Tasks backend needs Django 6 (django.tasks) or, on Django 5.2, the django-tasks "
            "backport: pip install 'worqr[django52]'"
        ) from exc

    LOGGER_NAME = "django_tasks"

__all__ = [
    "LOGGER_NAME",
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
