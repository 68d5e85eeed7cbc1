"""Who may see the dashboard and who may act: the one place that decides.

Seeing needs an active staff user with ``queues.view_dashboard`` (superusers have every
permission). Each action also needs its own permission from ``ACTION_PERMISSIONS``.
Anonymous users are sent to the admin's login page; everyone else without access gets 403.
Every answer says ``Cache-Control: private, no-store``.
A request that accepts JSON (the page's script) gets each refusal as ``{"ok": false,
"message"}`` instead: 401 when logged out, 403 without access, 405 for another method.
"""

from functools import wraps
from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, JsonResponse
from django.utils.cache import patch_cache_control

from ..models import ACTION_PERMISSIONS

VIEW_PERMISSION = "queues.view_dashboard"


def can_view(user):
    """True if ``user`` may see the dashboard."""
    return bool(
        user is not None
        and user.is_authenticated
        and user.is_active
        and user.is_staff
        and user.has_perm(VIEW_PERMISSION)
    )


def can_act(user, codename):
    """True if ``user`` may see the dashboard and perform the action ``codename``."""
    if codename not in ACTION_PERMISSIONS:
        raise ValueError(f"unknown action permission {codename!r}")
    return can_view(user) and user.has_perm(f"queues.{codename}")


def lacking(user, codenames):
    """Why ``user`` may not perform every action of ``codenames`` ("is deactivated", "lacks
    queues.purge_queue"...), or None if they may: what a running bulk job asks of its owner."""
    if user is None or not user.is_authenticated:
        return "is gone"
    if not user.is_active:
        return "is deactivated"
    if not user.is_staff:
        return "is no longer staff"
    for codename in ("view_dashboard", *codenames):
        if not can_act(user, codename):
            return f"lacks queues.{codename}"
    return None


acan_view = database_sync_to_async(can_view)


def session_can_view(session_key):
    """True if the session, read again from its store, still has a user who may view (False
    once logged out, expired, or after a password change or loss of permission)."""
    if not session_key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    return can_view(get_user(SimpleNamespace(session=store)))


asession_can_view = database_sync_to_async(session_can_view)


def allowed_actions(user):
    """The action codenames ``user`` may perform (for showing only the buttons that work)."""
    return {name for name in ACTION_PERMISSIONS if name != "view_dashboard" and can_act(user, name)}


def wants_json(request):
    """True for the page's script, which asks for JSON answers."""
    return "application/json" in request.headers.get("Accept", "")


def refused(request, status, message):
    """The refusal ``status`` (401, 403) as JSON for the page's script; otherwise anonymous
    users go to the login page and the others get Django's 403."""
    if wants_json(request):
        return JsonResponse({"ok": False, "message": message}, status=status)
    if status == 401:
        return redirect_to_login(request.get_full_path())
    raise PermissionDenied(message)


def _guard(codenames, view):
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        response = _checked(codenames, view, request, *args, **kwargs)
        # Payloads, errors and who did what: never kept by a shared cache or the browser's.
        patch_cache_control(response, private=True, no_store=True)
        return response

    return wrapper


def _checked(codenames, view, request, *args, **kwargs):
    if not request.user.is_authenticated:
        return refused(request, 401, "Your session has ended: log in again.")
    if not can_view(request.user):
        return refused(request, 403, "The queues dashboard is for staff with the view_dashboard permission.")
    for codename in codenames:
        if not can_act(request.user, codename):
            return refused(request, 403, f"This action needs the queues.{codename} permission.")
    return view(request, *args, **kwargs)


def staff_required(view):
    """Dashboard pages: anonymous users to the login page, others without access get 403."""
    return _guard((), view)


def action_required(*codenames):
    """Dashboard actions: like ``staff_required``, and the user needs ``queues.<codename>`` for
    each codename given."""
    return lambda view: _guard(codenames, view)


def post_only(view):
    """405 for any method but POST (as JSON for the page's script)."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method != "POST":
            if wants_json(request):
                response = JsonResponse({"ok": False, "message": "Actions are POST requests."}, status=405)
                response["Allow"] = "POST"
                return response
            return HttpResponseNotAllowed(["POST"])
        return view(request, *args, **kwargs)

    return wrapper
