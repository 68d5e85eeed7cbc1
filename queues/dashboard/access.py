"""Who may see the dashboard and who may act: the one place that decides.

Seeing needs an active staff user with ``queues.view_dashboard`` (superusers have every
permission). Each action also needs its own permission from ``ACTION_PERMISSIONS``.
Anonymous users are sent to the admin's login page; everyone else without access gets 403.
"""

from functools import wraps
from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied

from ..models import ACTION_PERMISSIONS

VIEW_PERMISSION = "queues.view_dashboard"


def can_view(user):
    """True if ``user`` may see the dashboard."""
    return bool(
        user is not None and user.is_authenticated and user.is_active and user.is_staff
        and user.has_perm(VIEW_PERMISSION)
    )


def can_act(user, codename):
    """True if ``user`` may see the dashboard and perform the action ``codename``."""
    if codename not in ACTION_PERMISSIONS:
        raise ValueError(f"unknown action permission {codename!r}")
    return can_view(user) and user.has_perm(f"queues.{codename}")


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


def staff_required(view):
    """Dashboard pages: anonymous users to the login page, others without access get 403."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not can_view(request.user):
            raise PermissionDenied("the queues dashboard is for staff with the view_dashboard permission")
        return view(request, *args, **kwargs)

    return wrapper


def action_required(codename):
    """Dashboard actions: like ``staff_required``, and the user needs ``queues.<codename>``."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not can_act(request.user, codename):
                raise PermissionDenied(f"this action needs the queues.{codename} permission")
            return view(request, *args, **kwargs)

        return wrapper

    return decorate
