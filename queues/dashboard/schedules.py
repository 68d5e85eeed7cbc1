"""The Schedules page's snapshot: every schedule with its timing in words, next and last run, the
last run's outcome and its state; built from the engine's read model, shared by the view, the
live feed and nothing else."""

from cron_descriptor import CasingTypeEnum, Options, get_description

from ..engine import readmodel, schedules, ticks
from .bounds import paged, preview
from .queries import epoch_ms, fmt

#: What the last run's task state says of its outcome; a task that is gone has finished
#: (completed, or cancelled) unless it failed (then it stays in the failed set).
OUTCOMES = {
    "pending": "pending",
    "delayed": "delayed",
    "waiting": "waiting",
    "active": "running",
    "failed": "failed",
    "completed": "completed",
    None: "finished",
}


def in_words(schedule):
    """'At 03:00 (Europe/Paris time)', 'At 03:00 (UTC time)', 'Every 10 seconds (UTC)': the time
    zone always shown. An interval's ticks are multiples of it since the Unix epoch, whatever its
    ``timezone`` (which only cron follows): UTC."""
    if schedule.every is not None:
        every = schedule.every
        return ("Every second" if every == 1 else f"Every {every:g} seconds") + " (UTC)"
    options = Options()
    options.use_24hour_time_format = True
    options.casing_type = CasingTypeEnum.Sentence
    try:
        words = get_description(ticks.Timing(cron=schedule.cron).expression, options)
    except Exception:  # best effort: the expression itself is shown beside it
        words = schedule.cron
    return f"{words} ({schedule.timezone} time)"


def row(schedule, outcome):
    return {
        "name": schedule.name,
        "queue": schedule.queue,
        "cron": schedule.cron or "",
        "every": schedule.every,
        "words": in_words(schedule),
        "timezone": schedule.timezone,
        "payload": preview(schedule.payload),
        "next": fmt(schedule.next_run),
        "next_ms": epoch_ms(schedule.next_run),
        "last": fmt(schedule.last_run),
        "last_ms": epoch_ms(schedule.last_run),
        "last_task_id": schedule.last_task_id or "",
        "last_kind": schedule.last_kind or "",
        "outcome": outcome if schedule.last_task_id else "",
        "paused": schedule.paused,
        "enabled": schedule.enabled,
        "missed": schedule.missed,
        "overlap": schedule.overlap,
        "runs": schedule.runs + schedule.triggered,  # every run enqueued, by tick or by hand
        "triggered": schedule.triggered,
        "skipped": schedule.skipped,
    }


def snapshot(client, page=1):
    """The Schedules page: {view, now_ms, schedules: one page of rows (``bounds.paged``)}."""
    listed = paged(schedules.all(client), page)
    found = listed["rows"]
    states = readmodel.task_states(client, [s.last_task_id for s in found if s.last_task_id])
    live = readmodel.live_schedules(client)
    listed["rows"] = [
        dict(
            row(s, OUTCOMES.get(states.get(s.last_task_id), "unknown")), live=s.name in live, settings=live.get(s.name)
        )
        for s in found
    ]
    return {"view": "schedules", "now_ms": readmodel.server_ms(client), "schedules": listed}
