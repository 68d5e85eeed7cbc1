"""Built-in webhook delivery: a task that carries a callback URL needs no Python handler.

1. Check the URL again (the allow-list may have changed since the task was created, and tasks
   enqueued from Python never went through the HTTP API's check).
2. POST ``{"id", "queue", "payload", "topic", "content"}`` (``topic``/``content`` repeat
   ``queue``/``payload`` for clients of the seed) with the task id and attempt in headers, so
   receivers can be idempotent: deliveries are at-least-once.
3. Judge the reply:
   - HTTP 429, or a body ``{"code": 101}``: "too many requests": raise RetryLater after the
     ``Retry-After`` header or the task's backoff; no attempt is used up;
   - any 2xx, or a body ``{"code": 100}``: delivered;
   - anything else (another status, a redirect, a timeout, a refused connection): raise
     DeliveryFailed, a failed attempt the engine retries with backoff and, after the last, keeps
     in the failed set and the failure history.

Settings (Django side, in ``settings.WORQR``): ``CALLBACK_ALLOWED_HOSTS`` (host names as in
Django's ALLOWED_HOSTS: ``"hooks.example.com"``, ``".example.com"`` for a domain and its
subdomains; empty, the default, means no callbacks) and ``CALLBACK_TIMEOUT`` (seconds for a
whole delivery, default 10).
"""

import email.utils
import http.client
import json
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.http.request import validate_host

from .conf import get_connection, setting
from .engine import readmodel
from .engine.errors import InvalidInput, RetryLater, WorqrError
from .engine.registry import HandlerSpec

DEFAULT_TIMEOUT = 10.0
#: Longest callback URL accepted (the engine's own limit).
MAX_URL_LENGTH = 2048
#: Only this much of a reply is read: enough for ``{"code": ...}`` and an error message.
MAX_REPLY_BYTES = 64 * 1024
USER_AGENT = "worqr-webhooks/1"


class InvalidCallback(InvalidInput):
    """A callback URL that is malformed, not http(s), or whose host is not allowed."""


class DeliveryFailed(WorqrError):
    """A delivery that did not succeed: a failed attempt."""


# -- settings ------------------------------------------------------------------------------


def allowed_hosts():
    """``WORQR["CALLBACK_ALLOWED_HOSTS"]``, lower-cased (empty: callbacks are off)."""
    hosts = setting("CALLBACK_ALLOWED_HOSTS", None) or []
    if not isinstance(hosts, (list, tuple)) or not all(isinstance(h, str) and h for h in hosts):
        raise ImproperlyConfigured("WORQR['CALLBACK_ALLOWED_HOSTS'] must be a list of host names")
    return [h.lower() for h in hosts]


def callback_timeout():
    """``WORQR["CALLBACK_TIMEOUT"]``: seconds a whole delivery may take (default 10)."""
    value = setting("CALLBACK_TIMEOUT", DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
        raise ImproperlyConfigured("WORQR['CALLBACK_TIMEOUT'] must be a number of seconds in (0, 3600]")
    return float(value)


# -- checking URLs -------------------------------------------------------------------------


def check_callback(url):
    """Return ``url`` if it may be called back, else raise InvalidCallback saying why."""
    if not isinstance(url, str):
        raise InvalidCallback(f"callback must be a string, not {type(url).__name__}")
    if not url or len(url) > MAX_URL_LENGTH:
        raise InvalidCallback(f"callback must be a URL of 1 to {MAX_URL_LENGTH} characters")
    if not url.isascii() or any(c <= " " or c == "\x7f" for c in url):
        raise InvalidCallback("callback must be an ASCII URL without spaces (percent-encode the rest)")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidCallback(f"callback is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidCallback("callback must be an http:// or https:// URL")
    if not parts.hostname:
        raise InvalidCallback("callback URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidCallback("callback URL must not carry credentials")
    if port == 0:
        raise InvalidCallback("callback URL has an invalid port")
    allowed = allowed_hosts()
    if not allowed:
        raise InvalidCallback("callbacks are disabled (WORQR['CALLBACK_ALLOWED_HOSTS'] is empty)")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if not validate_host(host, allowed):
        raise InvalidCallback(f"callback host {host!r} is not in WORQR['CALLBACK_ALLOWED_HOSTS']")
    return url


# -- delivering ----------------------------------------------------------------------------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect could lead past the allow-list: it is a failed delivery instead."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def body_of(task):
    payload = task.payload
    if isinstance(payload, bytes):  # enqueued from Python as bytes: JSON carries text only
        payload = payload.decode("utf-8", "replace")
    elif isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return {"id": task.id, "queue": task.queue, "payload": payload, "topic": task.queue, "content": payload}


def deliver(task):
    """The handler of callback tasks: POST the task to its callback URL (see the module doc)."""
    url = check_callback(task.callback)
    timeout = callback_timeout()
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(
        url, data=json.dumps(body_of(task)).encode(), method="POST",
        headers={
            "Content-Type": "application/json", "User-Agent": USER_AGENT,
            "X-Worqr-Task": task.id, "X-Worqr-Queue": task.queue, "X-Worqr-Attempt": str(task.attempt),
            "Idempotency-Key": task.id,
        },
    )
    try:
        try:
            with _opener.open(request, timeout=timeout) as reply:
                status, headers, text = reply.status, reply.headers, _read(reply, deadline)
        except urllib.error.HTTPError as exc:  # a non-2xx status: still a reply to judge
            try:
                status, headers, text = exc.code, exc.headers, _read(exc, deadline) if exc.fp else ""
            finally:
                exc.close()
    except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError, timeouts, resets
        reason = getattr(exc, "reason", None) or exc
        raise DeliveryFailed(f"POST {url} failed: {reason}") from None
    judge(task, url, status, headers, text)


def _read(reply, deadline):
    chunks, size = [], 0
    while size < MAX_REPLY_BYTES:
        if time.monotonic() > deadline:
            raise TimeoutError("the reply took longer than WORQR['CALLBACK_TIMEOUT']")
        chunk = reply.read1(min(16384, MAX_REPLY_BYTES - size)) if hasattr(reply, "read1") else reply.read(16384)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def reply_code(text):
    """The ``code`` of a seed-style JSON reply ``{"code": 100}``, or None."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    code = data.get("code") if isinstance(data, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def judge(task, url, status, headers, text):
    """Return on success, raise RetryLater for "too many requests", DeliveryFailed otherwise."""
    code = reply_code(text)
    if status == 429 or code == 101:
        delay = retry_after(headers.get("Retry-After")) if headers is not None else None
        if delay is None:
            delay = backoff_of(task)
        raise RetryLater(delay, f"callback {url} answered too many requests (HTTP {status}); retrying in {delay:g} s")
    if 200 <= status < 300 or code == 100:
        return
    snippet = " ".join(text.split())[:200]
    raise DeliveryFailed(f"callback {url} answered HTTP {status}" + (f": {snippet}" if snippet else ""))


def retry_after(value):
    """Seconds from a ``Retry-After`` header (seconds or an HTTP date), capped; None if unusable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), get_connection().config.backoff_max)


def backoff_of(task):
    """The wait a failed attempt would get: the task's (or the default) backoff * 2**(attempt-1)."""
    config = get_connection().config
    stored = readmodel.task(get_connection().client, task.id)
    base = stored.backoff if stored and stored.backoff is not None else config.backoff
    return min(base * 2 ** max(task.attempt - 1, 0), config.backoff_max)


def worker_callback_handler():
    """The HandlerSpec the worker runs callback tasks with, or None when callbacks are off."""
    if not allowed_hosts():
        return None
    callback_timeout()  # a bad setting stops the worker at start, not at the first delivery
    return HandlerSpec(queue="callbacks", func=deliver, is_async=False)
