"""Websocket routes of the dashboard (mounted by ``worqr_site.asgi``)."""

from django.urls import re_path

from .consumers import DashboardConsumer

websocket_urlpatterns = [
    re_path(r"^ws/queues/(?P<view>overview|workers)/$", DashboardConsumer.as_asgi()),
    re_path(r"^ws/queues/(?P<view>queue|task)/(?P<arg>[^/]+)/$", DashboardConsumer.as_asgi()),
]
