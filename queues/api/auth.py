"""Bearer tokens: the one place that decides who may call the API and what they may do.

A request carries ``Authorization: Bearer <token>``; the token's SHA-256 is looked up among the
tokens that are not revoked. Permissions are the dashboard's action permissions
(``queues.enqueue_task``...) given to the token in the admin or by ``manage.py api_token``.
Sessions and cookies are never looked at, so the API needs no CSRF protection.
"""

from datetime import timedelta

from django.utils import timezone

from ..models import ApiToken, hash_token
from ..quoting import shown
from .errors import Forbidden, Unauthorized

#: ``last_used`` is written at most this often per token, not on every request.
LAST_USED_EVERY = timedelta(minutes=1)
_MAX_TOKEN_LENGTH = 200


def authenticate(request):
    """The ApiToken of the request, or raise Unauthorized."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    raw = raw.strip()
    if scheme.lower() != "bearer" or not raw:
        raise Unauthorized("an 'Authorization: Bearer <token>' header is required")
    if len(raw) > _MAX_TOKEN_LENGTH or not raw.isascii():
        raise Unauthorized("invalid or revoked token")
    token = ApiToken.objects.filter(key_hash=hash_token(raw), revoked=False).first()
    if token is None:
        raise Unauthorized("invalid or revoked token")
    now = timezone.now()
    if token.last_used is None or now - token.last_used > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
    return token


def permissions_of(token):
    """The codenames of the token's worqr permissions (read once per request)."""
    if not hasattr(token, "_worqr_perms"):
        token._worqr_perms = set(
            token.permissions.filter(content_type__app_label="queues").values_list("codename", flat=True)
        )
    return token._worqr_perms


def can_view(token):
    """Whether the token may read what the dashboard shows (``view_dashboard``): a write's answer
    carries the state it changed only then, so a write-only token reads nothing through it."""
    return "view_dashboard" in permissions_of(token)


def require(token, codename):
    """Raise Forbidden unless the token carries ``queues.<codename>``."""
    if codename not in permissions_of(token):
        raise Forbidden(f"token {shown(token.name)} lacks the permission queues.{codename}")
