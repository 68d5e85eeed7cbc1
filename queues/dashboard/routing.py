"""Websocket routes of the dashboard, and the application a project mounts in its ASGI
application (imported from ``queues.routing``, its public path)::

    application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_app()})

The routes are named, so pages find their socket's address with
``reverse("live", urlconf="queues.dashboard.routing", ...)`` (see ``views.common.live_path``).
"""

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.urls import re_path

from .consumers import DashboardConsumer
from .origin import SameOriginOnly


async def not_found(scope, receive, send):
    """Any other path: HTTP 404 where the server supports ASGI denial responses; otherwise the
    handshake is accepted and closed at once with code 4404 (Daphne can only refuse with 403)."""
    await receive()  # websocket.connect
    if "websocket.http.response" in scope.get("extensions", {}):
        await send(
            {
                "type": "websocket.http.response.start",
                "status": 404,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")],
            }
        )
        await send({"type": "websocket.http.response.body", "body": b"No websocket at this path.\n"})
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": 4404})


urlpatterns = [
    re_path(r"^ws/queues/(?P<view>overview|workers|schedules|batches)/$", DashboardConsumer.as_asgi(), name="live"),
    re_path(r"^ws/queues/(?P<view>queue|task|worker|batch)/(?P<arg>[^/]+)/$", DashboardConsumer.as_asgi(), name="live"),
    re_path(r"", not_found),
]
websocket_urlpatterns = urlpatterns


def websocket_app():
    """The dashboard's websocket application: the origin check (scheme, host and port; see
    ``origin``), session authentication, then the routes."""
    return SameOriginOnly(AuthMiddlewareStack(URLRouter(urlpatterns)))
