"""The Schedules page's actions: pause, resume and trigger a schedule. POST only (CSRF-checked),
each behind the permission ``manage_schedules`` and recorded in the audit log; an unknown
schedule answers 404. Answers as the other actions do (``actions``): a redirect with a message,
or JSON for the page's script."""

from django.urls import reverse
from django.views.decorators.http import require_POST

from ...engine import schedules
from ...engine.errors import ScheduleNotFound
from ..access import action_required
from .actions import _audit, _done, _refused
from .common import BadInput, client

VERBS = {"pause": "paused", "resume": "resumed", "trigger": "triggered"}


def _schedule_action(action):
    @require_POST
    @action_required("manage_schedules")
    def view(request, name):
        c = client()
        try:
            found = schedules.get(c, name)
            if found is None:
                raise BadInput(f"There is no schedule {name!r}.", status=404)
            try:
                result = getattr(schedules, action)(c, name)
            except ScheduleNotFound:
                raise BadInput(f"There is no schedule {name!r}.", status=404) from None
        except BadInput as exc:
            return _refused(request, exc)
        if action == "trigger":
            _audit(request, "schedule_trigger", found.queue, result, f"schedule {name}")
            message = f"Schedule {name} triggered: task {result}."
        else:
            detail = f"schedule {name}" + ("" if result else ", no change")
            _audit(request, f"schedule_{action}", found.queue, "", detail)
            message = f"Schedule {name} {VERBS[action]}." if result else f"Schedule {name} was already {VERBS[action]}."
        return _done(request, message, reverse("queues:schedules"))

    view.__name__ = f"schedule_{action}"
    return view


schedule_pause, schedule_resume, schedule_trigger = (_schedule_action(a) for a in VERBS)
