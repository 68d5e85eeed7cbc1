"""ASGI entry point: HTTP through Django, websockets through the dashboard's consumers (staff
sessions only, from the site's own origins)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "worqr_site.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from queues.routing import websocket_app  # noqa: E402

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_app()})
