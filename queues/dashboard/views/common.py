"""What every dashboard page shares: the admin's look, the live socket's address, input checks
that turn bad input into 400/404 pages with a message."""

from urllib.parse import urlencode

from django.contrib import admin
from django.shortcuts import render
from django.urls import reverse

from ...conf import get_connection
from ...engine import keys, readmodel
from ...engine.errors import InvalidInput
from ...quoting import QUEUE_NAME_RULE, TASK_ID_RULE, shown
from .. import access, sections
from ..feeds import parse_page


class BadInput(Exception):
    """Bad input from the browser: shown as a page with ``status`` and ``message``."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.message, self.status = message, status


def client():
    return get_connection().client


def render_page(request, template, context, status=200):
    """Render a dashboard page inside the admin's frame (header, user links, theme); its
    sections get what the live socket renders them with (``sections.context``)."""
    ctx = admin.site.each_context(request)
    actions = access.allowed_actions(request.user)
    ctx.update(
        title="Queues", **sections.context(context.get("snap") or {}, actions, page_path=request.get_full_path())
    )
    ctx.update(context)
    return render(request, template, ctx, status=status)


def error_page(request, exc):
    return render_page(request, "queues/error.html", {"title": "Error", "message": exc.message}, status=exc.status)


def check_queue(name, must_exist=True):
    """A valid queue name (else 400) that is known (else 404)."""
    try:
        keys.check_queue_name(name)
    except ValueError:
        raise BadInput(f"{shown(name)} is not a queue name ({QUEUE_NAME_RULE}).") from None
    if must_exist and not readmodel.queue_exists(client(), name):
        raise BadInput(f"There is no queue {shown(name)}.", status=404)
    return name


def check_task_id(task_id):
    """A well-formed task id (``<queue>-<16 hex digits>``), else 400."""
    if keys.queue_from_task_id(task_id) is None:
        raise BadInput(f"{shown(task_id)} is not a task id ({TASK_ID_RULE}).")
    return task_id


def handles_bad_input(view):
    """Turn BadInput raised by ``view`` into an error page."""

    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except BadInput as exc:
            return error_page(request, exc)

    wrapper.__name__, wrapper.__doc__ = view.__name__, view.__doc__
    return wrapper


def page_of(request):
    """The ``?page=`` of a paged page (1 when absent), else BadInput."""
    try:
        return parse_page(request.GET.get("page"))
    except InvalidInput as exc:
        raise BadInput(str(exc)) from None


def live_path(view, arg=None, **params):
    """The websocket path of a view (reversed from the named routes of ``queues.dashboard.routing``)."""
    kwargs = {"view": view, **({"arg": arg} if arg else {})}
    path = reverse("live", urlconf="queues.dashboard.routing", kwargs=kwargs)
    params = {k: v for k, v in params.items() if v is not None}
    return path + ("?" + urlencode(params) if params else "")
