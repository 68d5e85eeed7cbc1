"""Schedules made at run time, from the Schedules page: create, change and delete (the form under
the table and each live schedule's row). POST only (CSRF-checked), behind ``change_schedule``,
audited; a bad field answers 400 naming it and writes nothing; a schedule of the settings is
changed in settings (409)."""

from django.urls import reverse

from ...conf import get_connection
from ...engine import live_schedules
from ...engine.errors import InvalidSchedule, ScheduleNotFound
from ...quoting import shown
from ...webhooks import InvalidCallback, check_callback
from ..access import action_required, post_only
from .actions import _audit, _done, _refused
from .common import BadInput, client

#: Form fields: (name, kind) — text, number (int or float), integer, choice or flag.
FIELDS = (
    ("queue", "text"),
    ("cron", "text"),
    ("every", "number"),
    ("timezone", "text"),
    ("payload", "text"),
    ("missed", "text"),
    ("overlap", "flag"),
    ("retries", "integer"),
    ("timeout", "number"),
    ("backoff", "number"),
    ("lock", "text"),
    ("callback", "text"),
)
#: Longest text a field may hold (the payload: MAX_PAYLOAD_BYTES is checked by the engine).
FIELD_MAX = 10_000


def settings_from(post, changing):
    """The schedule settings a form posted: empty fields left out (a change keeps them as they
    are); raises BadInput naming a field that is not what it must be."""
    out = {}
    for name, kind in FIELDS:
        raw = post.get(name)
        if kind == "flag":
            if f"{name}-given" in post:  # the form's checkbox (unticked sends nothing)
                out[name] = raw == "on"
            continue
        if raw is None or raw.strip() == "":
            continue
        raw = raw.strip() if name != "payload" else raw
        if len(raw) > FIELD_MAX:
            raise BadInput(f"{name}: at most {FIELD_MAX} characters.")
        if kind == "text":
            out[name] = raw
            continue
        try:
            if not raw.isascii():
                raise ValueError(raw)
            value = int(raw) if kind == "integer" or raw.lstrip("-").isdigit() else float(raw)
        except ValueError:
            raise BadInput(
                f"{name}: {shown(raw)} is not {'an integer' if kind == 'integer' else 'a number'}."
            ) from None
        out[name] = value
    if "every" in out and "cron" in out and changing:
        raise BadInput("cron, every: give one of them.")
    if out.get("callback"):
        try:
            check_callback(out["callback"])
        except InvalidCallback as exc:
            raise BadInput(f"callback: {exc}") from None
    return out


def _edit(action):
    @post_only
    @action_required("change_schedule")
    def view(request, name=None):
        c = client()
        name = name if name is not None else (request.POST.get("name") or "").strip()
        try:
            settings = settings_from(request.POST, action == "update") if action != "delete" else {}
            try:
                if action == "create":
                    live_schedules.create(c, name, config=get_connection().config, **settings)
                elif action == "update":
                    live_schedules.update(c, name, config=get_connection().config, **settings)
                else:
                    if request.POST.get("confirm") != "yes":
                        raise BadInput(f"Tick the box to confirm deleting schedule {shown(name)}.")
                    live_schedules.delete(c, name)
            except ScheduleNotFound:
                raise BadInput(f"There is no schedule {shown(name)} made here.", status=404) from None
            except InvalidSchedule as exc:
                taken = exc.field is None and ("exists already" in exc.reason or "declared in settings" in exc.reason)
                status = 409 if taken else 400
                raise BadInput(str(exc), status=status) from None
        except BadInput as exc:
            return _refused(request, exc)
        _audit(request, f"schedule_{action}", settings.get("queue", ""), "", f"schedule {name} {settings or ''}"[:1000])
        verb = {"create": "created", "update": "changed", "delete": "deleted"}[action]
        return _done(request, f"Schedule {name} {verb}.", reverse("queues:schedules"))

    view.__name__ = f"schedule_{action}"
    return view


schedule_create, schedule_update, schedule_delete = (_edit(a) for a in ("create", "update", "delete"))
