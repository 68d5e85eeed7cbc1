from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from queues.metrics import metrics_view

urlpatterns = [
    path("", RedirectView.as_view(url="/queues/", permanent=False)),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="worqr-metrics"),  # Prometheus (queues.metrics)
    path("queues/", include("queues.dashboard.urls")),   # the dashboard (issue 5)
    path("api/", include("queues.api.urls")),   # the HTTP API (issue 6)
]
