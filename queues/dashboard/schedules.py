"""The Schedules page's snapshot: every schedule with its timing in words, next and last run, the
last run's outcome and its state; built from the engine's read model, shared by the view, the
live feed and nothing else.

Bounded whatever the schedules hold (``bounds``): a page of rows, read alone from Redis; in each
row a payload and a cron only as long as ``preview`` shows them whole, else their preview (a
payload can be MAX_PAYLOAD_BYTES, and the live section is rendered again at every event).
"""

from cron_descriptor import CasingTypeEnum, Options, get_description

from ..engine import readmodel, schedules, ticks
from .bounds import PAYLOAD_PREVIEW, paged, preview
from .queries import epoch_ms, fmt

#: The most characters of a cron (and of its cron in words) a row shows.
CRON_SHOWN = 200

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
    cron = schedule.cron or ""
    if len(cron) <= CRON_SHOWN:
        words = preview(in_words(schedule), CRON_SHOWN)
    else:  # not put in words: its description would be as long
        words = f"A cron of {len(cron):,} characters ({schedule.timezone} time)"
    return {
        "name": schedule.name,
        "queue": schedule.queue,
        "cron": preview(cron, CRON_SHOWN),
        "every": schedule.every,
        "words": words,
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


def form_values(settings, payload_limit=PAYLOAD_PREVIEW, cron_limit=CRON_SHOWN):
    """What a Change form is filled with: a live schedule's settings as given, but a payload or
    cron over its limit (the list's rows: what ``preview`` shows whole), or a payload of more than
    one line (a one-line field would lose its line breaks), is left out: its field stays empty,
    and an empty field keeps the setting as it is. ``cut`` has the preview of each left out."""
    out, cut = dict(settings), {}
    for key, limit in (("payload", payload_limit), ("cron", cron_limit)):
        value = out.get(key)
        if not isinstance(value, str):
            continue
        if preview(value, limit) != value or (key == "payload" and ("\n" in value or "\r" in value)):
            cut[key] = preview(out.pop(key))
    out["cut"] = cut
    return out


def live_settings(client, names):
    """{name: its settings as given} of those of ``names`` made at run time; an unreadable entry
    is left out."""
    return readmodel.live_schedules(client, names)


def snapshot(client, page=1):
    """The Schedules page: {view, now_ms, schedules: one page of rows (``bounds.paged``)}; only the
    page's schedules are read."""
    listed = paged(sorted(readmodel.schedule_index(client).items()), page)
    read = (schedules.Schedule.from_hash(*entry) for entry in readmodel.schedule_hashes(client, listed["rows"]))
    found = [s for s in read if s is not None]  # one deleted meanwhile is left out
    states = readmodel.task_states(client, [s.last_task_id for s in found if s.last_task_id])
    live = live_settings(client, [s.name for s in found])
    listed["rows"] = [
        dict(
            row(s, OUTCOMES.get(states.get(s.last_task_id), "unknown")),
            live=s.name in live,
            settings=form_values(live[s.name]) if s.name in live else None,
        )
        for s in found
    ]
    return {"view": "schedules", "now_ms": readmodel.server_ms(client), "schedules": listed}
