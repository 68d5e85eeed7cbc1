"""Every HTTP route of the app, for a project to mount with one line::

    urlpatterns = [..., path("", include("queues.urls"))]

which serves the dashboard at ``/queues/`` (namespace ``queues``), the HTTP API at ``/api/``
(namespace ``queues-api``) and Prometheus' ``/metrics`` (name ``worqr-metrics``). The websocket
routes are mounted separately, in the project's ASGI application (``queues.routing``).
"""

from django.urls import include, path

from .metrics import metrics_view

urlpatterns = [
    path("queues/", include("queues.dashboard.urls")),
    path("api/", include("queues.api.urls")),
    path("metrics", metrics_view, name="worqr-metrics"),
]
