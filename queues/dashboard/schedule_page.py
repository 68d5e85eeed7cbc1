"""One schedule's page: its settings, its next runs, its last runs that ended (with their tasks
and outcomes, from the record of ended tasks), its last run, and its lateness (the fire
script's histogram of enqueue time minus tick); for a schedule made at run time, the Change form
filled with its settings, its whole payload included (up to what the form takes back)."""

from datetime import UTC, datetime

from ..engine import readmodel, schedules, ticks
from .bounds import preview
from .queries import fmt
from .schedules import OUTCOMES, form_values, in_words, live_settings
from .views.schedule_edits import FIELD_MAX

#: Next runs shown, and last runs (ended, their record kept) looked for.
NEXT_SHOWN, RUNS_SHOWN = 5, 50


def _ms_text(ms):
    return fmt(datetime.fromtimestamp(ms / 1000, UTC)) if ms is not None else ""


def snapshot(client, name):
    """The page's snapshot, or None if there is no schedule ``name``."""
    s = schedules.get(client, name)
    if s is None:
        return None
    now = readmodel.server_ms(client)
    upcoming, at = [], now
    if s.next_run is not None and not s.paused and s.enabled:
        at = int(s.next_run.timestamp() * 1000)
        upcoming.append(at)
        while len(upcoming) < NEXT_SHOWN:
            at = ticks.next_after(s.timing, at)
            upcoming.append(at)
    runs = []
    for e in readmodel.schedule_runs(client, s.queue, name, limit=RUNS_SHOWN):
        tick = e.run.get("tick")
        late = None
        if isinstance(tick, int) and e.task.created_at is not None:
            late = round(max(0, e.task.created_at.timestamp() * 1000 - tick) / 1000, 3)
        runs.append(
            {
                "id": e.task.id,
                "tick": _ms_text(tick) if isinstance(tick, int) else "",
                "kind": e.run.get("kind") or "",
                "outcome": e.task.state,
                "enqueued": fmt(e.task.created_at),
                "finished": fmt(e.task.finished_at),
                "late": late,
                "error": preview(e.task.error, 200),
            }
        )
    state = readmodel.task_states(client, [s.last_task_id]) if s.last_task_id else {}
    late = s.lateness or {}
    settings = live_settings(client, [name]).get(name)
    return {
        "view": "schedule",
        "now_ms": now,
        "name": name,
        "queue": s.queue,
        "words": in_words(s),
        "cron": s.cron or "",
        "every": s.every,
        "payload": preview(s.payload),
        "live": settings is not None,
        "settings": form_values(settings, FIELD_MAX) if settings is not None else None,
        "paused": s.paused,
        "enabled": s.enabled,
        "missed": s.missed,
        "overlap": s.overlap,
        "next": [_ms_text(t) for t in upcoming],
        "last": fmt(s.last_run),
        "last_task_id": s.last_task_id or "",
        "last_outcome": OUTCOMES.get(state.get(s.last_task_id), "unknown") if s.last_task_id else "",
        "runs": runs,
        "counts": {"runs": s.runs, "triggered": s.triggered, "skipped": s.skipped, "catchups": s.catchups},
        "lateness": {
            "count": late.get("count", 0),
            "mean": round(late["sum"] / late["count"], 4) if late.get("count") else None,
            "buckets": [(b, n) for b, n in late.get("buckets", ()) if n][:8],
        },
    }
