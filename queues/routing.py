"""Websocket routes of the dashboard.

A project mounts them with ``websocket_app()`` in its ASGI application::

    application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_app()})
"""

from django.urls import re_path

from .consumers import DashboardConsumer

websocket_urlpatterns = [
    re_path(r"^ws/queues/(?P<view>overview|workers|schedules)/$", DashboardConsumer.as_asgi()),
    re_path(r"^ws/queues/(?P<view>queue|task)/(?P<arg>[^/]+)/$", DashboardConsumer.as_asgi()),
]


def websocket_app():
    """The dashboard's websocket application: origin check, session auth, then the routes."""
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator

    return AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
