"""Redis down: every dashboard page answers 503 with a page that says so (the page's script gets
``{"ok": false, "message"}``), never a raw 500 ``ConnectionError``.

``guard_all`` wraps each of the dashboard's URL patterns outside its access checks, so the same
users are refused the same way whether Redis is up or not: only a request that passed them can
reach Redis, and so this page. The page extends the admin's frame alone (the dashboard's own
frame reads Redis).
"""

import logging
from functools import wraps

import redis
from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.contrib import admin
from django.http import JsonResponse
from django.shortcuts import render
from django.utils.cache import patch_cache_control

from ..engine.errors import RedisUnavailable
from .access import wants_json

log = logging.getLogger("worqr.dashboard")

#: What Redis being unreachable raises: redis-py's errors, and the engine's once its retries ran out.
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, RedisUnavailable)

MESSAGE = (
    "The queue store (Redis) cannot be reached, so the dashboard can neither show nor change "
    "anything. Workers wait for it and go on when it is back; reload this page then."
)

#: Seconds a client is told to wait before trying again.
RETRY_AFTER = 5


def unavailable(request, exc):
    """The 503 answer to ``request``, which found Redis down (``exc``)."""
    log.warning("worqr dashboard: Redis unavailable: %s", exc)
    if wants_json(request):
        response = JsonResponse({"ok": False, "message": MESSAGE}, status=503)
    else:
        context = {
            **admin.site.each_context(request),
            "title": "Redis is unavailable",
            "message": MESSAGE,
            "error": str(exc)[:500],
        }
        response = render(request, "queues/unavailable.html", context, status=503)
    response["Retry-After"] = str(RETRY_AFTER)
    patch_cache_control(response, private=True, no_store=True)
    return response


def guard(view):
    """``view``, answering 503 when Redis cannot be reached."""

    if iscoroutinefunction(view):

        @wraps(view)
        async def awrapper(request, *args, **kwargs):
            try:
                return await view(request, *args, **kwargs)
            except REDIS_DOWN as exc:
                return await sync_to_async(unavailable)(request, exc)  # the admin's frame reads the database

        return markcoroutinefunction(awrapper)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except REDIS_DOWN as exc:
            return unavailable(request, exc)

    return wrapper


def guard_all(patterns):
    """Guard the view of every URL pattern of ``patterns`` (in place); ``patterns``."""
    for pattern in patterns:
        pattern.callback = guard(pattern.callback)
    return patterns
