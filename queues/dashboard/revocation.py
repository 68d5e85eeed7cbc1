"""Access changes pushed to the dashboard's open sockets, in every server process.

When a user logs out, is deactivated or changed, or loses a permission (their own, through a
group, or a group), a message goes out on the Redis channel ``keys.ACCESS_CHANGES`` once the
database change is committed. Each server process hears it through its one ``hub``
subscriber, and hands it to the sockets it concerns (``Watch``): a logout closes the sockets
of that session at once; the other changes make the sockets of those users check their
access again, from the database, and close if it is gone. Nothing is polled.

Messages: ``{"session": "<sha256 of the session key>"}`` or ``{"users": ["<pk>", ...]}``.
Publishing is best effort: with Redis down the change is logged, not lost for the database,
and sockets still check their access again before sending anything later than
``DashboardConsumer.recheck_every`` after their last check.
"""

import asyncio
import hashlib
import json
import logging

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete

from ..conf import get_connection
from ..engine import keys
from ..engine.connection import NETWORK_ERRORS
from .hub import get_hub

log = logging.getLogger("worqr.dashboard")


def session_digest(session_key):
    return hashlib.sha256(session_key.encode()).hexdigest()


def publish(message):
    """Send an access change to every server process (best effort)."""
    try:
        get_connection().client.publish(keys.ACCESS_CHANGES, json.dumps(message))
    except NETWORK_ERRORS as exc:
        log.warning("worqr dashboard: could not announce an access change (%s): %s", exc, message)


def users_changed(pks):
    """Announce, after the current transaction commits, that these users' access may be less."""
    pks = sorted({str(pk) for pk in pks})
    if pks:
        transaction.on_commit(lambda: publish({"users": pks}))


# -- what changes access -------------------------------------------------------------------


def _logged_out(sender, request, user, **kwargs):
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        publish({"session": session_digest(key)})


def _user_saved(sender, instance, created, update_fields, **kwargs):
    if sender is get_user_model() and not created and set(update_fields or ()) != {"last_login"}:
        users_changed([instance.pk])


def _user_deleted(sender, instance, **kwargs):
    if sender is get_user_model():
        users_changed([instance.pk])


def _group_deleted(sender, instance, **kwargs):
    users_changed(instance.user_set.values_list("pk", flat=True))


def _members_of(groups):
    return get_user_model().objects.filter(groups__in=list(groups)).values_list("pk", flat=True)


def _m2m_changed(sender, instance, action, reverse, pk_set, **kwargs):
    """Permissions or groups removed from users, or permissions from groups."""
    User = get_user_model()
    user_sides = {getattr(getattr(User, name, None), "through", None) for name in ("user_permissions", "groups")}
    if sender in user_sides - {None}:
        if action == "post_remove" or (action == "post_clear" and not reverse):
            users_changed(pk_set if reverse else [instance.pk])
        elif action == "pre_clear" and reverse:  # permission.user_set.clear(): its users, before
            users_changed(instance.user_set.values_list("pk", flat=True))
    elif sender is Group.permissions.through:
        if action == "post_remove" or (action == "post_clear" and not reverse):
            users_changed(_members_of(pk_set if reverse else [instance.pk]))
        elif action == "pre_clear" and reverse:  # permission.group_set.clear()
            users_changed(_members_of(instance.group_set.values_list("pk", flat=True)))


def connect_signals():
    """Connect the receivers (from the app's ``ready``)."""
    user_logged_out.connect(_logged_out, dispatch_uid="worqr-access-logout")
    post_save.connect(_user_saved, dispatch_uid="worqr-access-user-saved")
    post_delete.connect(_user_deleted, dispatch_uid="worqr-access-user-deleted")
    pre_delete.connect(_group_deleted, sender=Group, dispatch_uid="worqr-access-group-deleted")
    m2m_changed.connect(_m2m_changed, dispatch_uid="worqr-access-m2m")


# -- the sockets' side ---------------------------------------------------------------------


class Watch:
    """Tells one socket when its access must go (``revoke()``) or be checked again
    (``recheck()``, both coroutine functions of the socket)."""

    def __init__(self, user_pk, session_key, revoke, recheck):
        self.user = str(user_pk).encode()
        self.digest = session_digest(session_key).encode() if session_key else None
        self.revoke, self.recheck = revoke, recheck
        self.hub = None
        self._pending = set()

    async def start(self):
        """Listen; returns once subscribed, so no change made after it can be missed."""
        self.hub = get_hub()
        await self.hub.add(keys.ACCESS_CHANGES, self._heard)

    async def stop(self):
        if self.hub is not None:
            hub, self.hub = self.hub, None
            await hub.remove(keys.ACCESS_CHANGES, self._heard)

    def _heard(self, data):
        if data is None:  # messages may have been missed
            self._schedule(self.recheck)
        elif self.digest is not None and self.digest in data:
            self._schedule(self.revoke)
        elif b'"users"' in data and self.user in data:
            try:
                users = json.loads(data).get("users", [])
            except (ValueError, AttributeError):
                return
            if self.user.decode() in users:
                self._schedule(self.recheck)

    def _schedule(self, action):
        task = asyncio.ensure_future(action())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
