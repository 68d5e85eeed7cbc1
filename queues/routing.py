"""The dashboard's websocket application where a project's ASGI application imports it::

    from queues.routing import websocket_app

    application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_app()})

The routes and the consumer live with the dashboard (``queues.dashboard.routing``); this module
keeps the documented path.
"""

from .dashboard.routing import urlpatterns, websocket_app, websocket_urlpatterns

__all__ = ["urlpatterns", "websocket_app", "websocket_urlpatterns"]
