"""Websocket routes of the dashboard, and the application a project mounts in its ASGI
application::

    application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_app()})

The routes are named, so pages find their socket's address with
``reverse("live", urlconf="queues.routing", ...)`` (see ``dashboard.views.common.live_path``).
"""

from django.urls import re_path

from .consumers import DashboardConsumer


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
    ``dashboard.origin``), session authentication, then the routes."""
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter

    from .dashboard.origin import SameOriginOnly

    return SameOriginOnly(AuthMiddlewareStack(URLRouter(urlpatterns)))
