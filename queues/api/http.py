"""Request plumbing shared by every endpoint.

``@endpoint(GET="view_dashboard", POST="enqueue_task")`` makes a view that:

1. authenticates the bearer token (401), before anything else is looked at;
2. refuses other methods (405, with ``Allow``);
3. checks the method's permission (403); ``None`` leaves the check to the view (when it depends
   on what the request does, as for DELETE of a task);
4. calls ``view(request, token, ...)`` and turns every ApiError, engine input error and Redis
   outage into a JSON error response, so bad input is never a 500.

``json_body`` reads a JSON object body (415 for another media type, 413 past any valid size,
400 for bad JSON, duplicate keys, NaN/Infinity or a non-object).
"""

import functools
import json
import logging

import redis
from django.http import JsonResponse
from django.utils.cache import patch_cache_control
from django.views.decorators.csrf import csrf_exempt

from ..conf import get_connection
from ..engine.errors import WorqrError
from ..quoting import shown
from .auth import authenticate, require
from .bodies import parse_int
from .errors import (
    ApiError,
    BadRequest,
    MethodNotAllowed,
    NotFound,
    RequestTooLarge,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    from_engine,
)

log = logging.getLogger("worqr.api")

#: A body may hold a payload of MAX_PAYLOAD_BYTES with every byte JSON-escaped (``\u0000`` is 6
#: bytes for 1) plus the other fields; anything longer cannot be a valid request.
_ESCAPE_FACTOR, _BODY_OVERHEAD = 6, 64 * 1024


def error_response(exc):
    response = JsonResponse(exc.as_dict(), status=exc.status)
    if isinstance(exc, MethodNotAllowed):
        response["Allow"] = ", ".join(exc.allowed)
    if isinstance(exc, Unauthorized):
        response["WWW-Authenticate"] = 'Bearer realm="worqr"'
    return response


def handle_errors(view):
    """Turn ApiErrors, engine input errors and Redis outages into JSON responses; every answer
    says ``Cache-Control: private, no-store``."""

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        response = _answer(view, request, *args, **kwargs)
        patch_cache_control(response, private=True, no_store=True)  # tasks' payloads: kept by no cache
        return response

    return wrapper


def _answer(view, request, *args, **kwargs):
    try:
        return view(request, *args, **kwargs)
    except ApiError as exc:
        return error_response(exc)
    except WorqrError as exc:
        mapped = from_engine(exc)
        if mapped is None:
            raise
        return error_response(mapped)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        log.warning("worqr api: Redis unavailable: %s", exc)
        return error_response(Unavailable("the queue store (Redis) is unavailable; try again"))


def endpoint(**permissions):
    """A token-authenticated JSON endpoint: ``METHOD=permission codename (or None)``."""
    allowed = sorted(permissions)

    def wrap(view):
        @csrf_exempt
        @handle_errors
        @functools.wraps(view)
        def dispatch(request, *args, **kwargs):
            token = authenticate(request)
            if request.method not in permissions:
                raise MethodNotAllowed(request.method, allowed)
            if permissions[request.method]:
                require(token, permissions[request.method])
            return view(request, token, *args, **kwargs)

        dispatch.api_methods = allowed
        return dispatch

    return wrap


@csrf_exempt
@handle_errors
def not_found(request, *args, **kwargs):
    """Any other URL under the API: a JSON 404."""
    raise NotFound(f"no API endpoint at {shown(request.path)}")


class _Duplicate(Exception):
    def __init__(self, name):
        self.name = name


def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _no_constants(name):
    raise ValueError(f"{name} is not valid JSON")


def max_body_bytes():
    return get_connection().config.max_payload_bytes * _ESCAPE_FACTOR + _BODY_OVERHEAD


def json_body(request):
    """The request's body as a dict, or raise the ApiError that says what is wrong with it."""
    ctype = (request.content_type or "").lower()
    if ctype != "application/json" and not (ctype.startswith("application/") and ctype.endswith("+json")):
        raise UnsupportedMediaType("the body must be JSON, sent with 'Content-Type: application/json'")
    charset = (request.content_params.get("charset") or "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise UnsupportedMediaType("JSON bodies must be UTF-8")
    limit = max_body_bytes()
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise RequestTooLarge(f"the body is over {limit} bytes, more than any valid request")
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise RequestTooLarge(f"the body is over {limit} bytes, more than any valid request")
    try:
        data = json.loads(
            raw.decode("utf-8-sig"), parse_constant=_no_constants, parse_int=parse_int, object_pairs_hook=_no_duplicates
        )
    except UnicodeDecodeError:
        raise BadRequest("the body is not valid UTF-8") from None
    except _Duplicate as exc:
        raise BadRequest(f"{shown(exc.name)}: given more than once", exc.name) from None
    except RecursionError:
        raise BadRequest("the body is not valid JSON: it is nested too deeply") from None
    except ValueError as exc:  # json's messages say where: "Expecting value: line 1 column 5 (char 4)"
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def respond(data, status=200):
    return JsonResponse(data, status=status)
