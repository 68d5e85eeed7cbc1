"""Which pages may open the dashboard's websocket: only the site's own origins.

A browser sends the session cookie with a websocket handshake from any page (cookies don't
depend on the port, and a socket is not bound by the same-origin policy), so the handshake's
``Origin`` must be checked, in full: scheme, host and port.

Allowed: the origin of the handshake itself (``https`` for ``wss`` or, behind a proxy, as
``SECURE_PROXY_SSL_HEADER`` says; the ``Host`` header, or ``X-Forwarded-Host`` with
``USE_X_FORWARDED_HOST``, which must match ``ALLOWED_HOSTS``), and ``CSRF_TRUSTED_ORIGINS``
(exact origins, or ``scheme://*.domain`` for subdomains), as Django's CSRF check allows them.
A handshake without an Origin is refused.
"""

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


def _headers(scope):
    out = {}
    for name, value in scope.get("headers", ()):
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _scheme(scope, headers):
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, secure_value = proxy
        header = name.lower().removeprefix("http_").replace("_", "-")
        if header in headers:
            return "https" if headers[header].split(",")[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def _allowed_hosts():
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:  # as Django's HttpRequest.get_host()
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def _origin(scheme, netloc):
    """(scheme, host, port) of ``scheme://netloc``, or None if it is not one."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS.get(scheme)


def site_origin(scope):
    """The origin a page of this site has when it opens this handshake, or None if the Host is
    not allowed."""
    headers = _headers(scope)
    host = headers.get("x-forwarded-host") if settings.USE_X_FORWARDED_HOST else None
    host = (host or headers.get("host") or "").split(",")[0].strip()
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, _allowed_hosts()):
        return None
    return _origin(_scheme(scope, headers), host)


def origin_allowed(scope):
    """True if the handshake's Origin is the site's own, or a trusted one."""
    origin = _headers(scope).get("origin", "")
    scheme, _, netloc = origin.partition("://")
    parsed = _origin(scheme, netloc) if scheme in DEFAULT_PORTS else None
    if parsed is None:
        return False
    if parsed == site_origin(scope):
        return True
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        t_scheme, _, t_netloc = trusted.partition("://")
        if "*" in t_netloc:
            if t_scheme == scheme and is_same_domain(netloc.lower(), t_netloc[1:].lower()):
                return True
        elif _origin(t_scheme, t_netloc) == parsed:
            return True
    return False


class SameOriginOnly:
    """ASGI middleware: refuses (HTTP 403 at the handshake) sockets from other origins."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier.as_asgi()(scope, receive, send)
        return await self.application(scope, receive, send)
