"""The dashboard's URLs, mounted at ``/queues/`` (namespace ``queues``)."""

from django.urls import path

from .unavailable import guard_all
from .views import (
    actions,
    again,
    batches,
    failures_all,
    overview,
    queue,
    schedule_actions,
    schedule_edits,
    schedule_page,
    schedules,
    search,
    task,
    workers,
)

app_name = "queues"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("workers/", workers.workers, name="workers"),
    path("workers/<str:name>/", workers.worker, name="worker"),
    path("workers/<str:name>/quiet/", workers.worker_quiet, name="worker-quiet"),
    path("workers/<str:name>/stop/", workers.worker_stop, name="worker-stop"),
    path("schedules/", schedules.schedules, name="schedules"),
    path("schedules/new/", schedule_edits.schedule_create, name="schedule-create"),
    path("schedules/<str:name>/", schedule_page.schedule, name="schedule"),
    path("schedules/<str:name>/edit/", schedule_edits.schedule_update, name="schedule-update"),
    path("schedules/<str:name>/delete/", schedule_edits.schedule_delete, name="schedule-delete"),
    path("schedules/<str:name>/pause/", schedule_actions.schedule_pause, name="schedule-pause"),
    path("schedules/<str:name>/resume/", schedule_actions.schedule_resume, name="schedule-resume"),
    path("schedules/<str:name>/trigger/", schedule_actions.schedule_trigger, name="schedule-trigger"),
    path("batches/", batches.batch_list, name="batches"),
    path("batches/<str:batch_id>/", batches.batch, name="batch"),
    path("batches/<str:batch_id>/cancel/", batches.batch_cancel, name="batch-cancel"),
    path("batches/<str:batch_id>/retry/", batches.batch_retry, name="batch-retry"),
    path("q/<str:name>/", queue.queue, name="queue"),
    path("q/<str:name>/history/", queue.history, name="queue-history"),
    path("q/<str:name>/failures/", queue.failures, name="queue-failures"),
    path("q/<str:name>/pause/", actions.queue_pause, name="queue-pause"),
    path("q/<str:name>/resume/", actions.queue_resume, name="queue-resume"),
    path("q/<str:name>/purge/", actions.queue_purge, name="queue-purge"),
    path("q/<str:name>/retry-all/", actions.queue_retry_all, name="queue-retry-all"),
    path("q/<str:name>/limits/", actions.queue_limits, name="queue-limits"),
    path("failures/", failures_all.failures_all, name="failures"),
    path("search/", search.search, name="search"),
    path("search/bulk/", search.bulk_start, name="bulk-start"),
    path("search/bulk/<str:job>/", search.bulk_status, name="bulk"),
    path("search/bulk/<str:job>/stop/", search.bulk_stop, name="bulk-stop"),
    path("task/", task.lookup, name="lookup"),
    path("task/<str:task_id>/", task.task, name="task"),
    path("task/<str:task_id>/log/", task.log, name="task-log"),
    path("task/<str:task_id>/workflow/", task.workflow, name="task-workflow"),
    path("task/<str:task_id>/cancel/", actions.task_cancel, name="task-cancel"),
    path("task/<str:task_id>/retry/", actions.task_retry, name="task-retry"),
    path("task/<str:task_id>/delete/", actions.task_delete, name="task-delete"),
    path("task/<str:task_id>/run-now/", actions.task_run_now, name="task-run-now"),
    path("task/<str:task_id>/again/", again.task_run_again, name="task-run-again"),
]

guard_all(urlpatterns)  # Redis down: 503 pages, not 500s (queues.dashboard.unavailable)
