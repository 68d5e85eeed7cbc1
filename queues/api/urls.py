"""Routes of the HTTP API, mounted at ``api/`` by ``queues.urls``."""

from django.urls import path, re_path

from . import batches, compat, openapi, schedules, views
from .http import not_found

app_name = "queues-api"

urlpatterns = [
    path("tasks", views.tasks, name="tasks"),
    path("tasks/<str:task_id>", views.task, name="task"),
    path("tasks/<str:task_id>/run-now", views.task_run_now, name="task-run-now"),
    path("queues", views.queues, name="queues"),
    path("queues/<str:name>", views.queue, name="queue"),
    path("queues/<str:name>/pause", views.pause, name="pause"),
    path("queues/<str:name>/resume", views.resume, name="resume"),
    path("queues/<str:name>/limits", views.limits, name="limits"),
    path("schedules", schedules.schedule_list, name="schedules"),
    path("schedules/<str:name>", schedules.schedule, name="schedule"),
    path("schedules/<str:name>/pause", schedules.pause, name="schedule-pause"),
    path("schedules/<str:name>/resume", schedules.resume, name="schedule-resume"),
    path("schedules/<str:name>/trigger", schedules.trigger, name="schedule-trigger"),
    path("batches", batches.batch_list, name="batches"),
    path("batches/<str:batch_id>", batches.batch, name="batch"),
    path("batches/<str:batch_id>/tasks", batches.batch_tasks, name="batch-tasks"),
    path("batches/<str:batch_id>/close", batches.batch_close, name="batch-close"),
    path("create", compat.create, name="seed-create"),
    path("query", compat.query, name="seed-query"),
    path("delete", compat.delete, name="seed-delete"),
    path("openapi.json", openapi.openapi_json, name="openapi"),
    re_path(r"^.*$", not_found),
]
