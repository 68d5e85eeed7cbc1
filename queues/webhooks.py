"""Built-in webhook delivery: a task that carries a callback URL needs no Python handler.

1. Check the URL against ``CALLBACK_ALLOWED_HOSTS`` again (the list may have changed since the
   task was created, and tasks enqueued from Python never went through the HTTP API's check),
   resolve its host once, and refuse loopback, private, link-local and other non-public
   addresses unless an IP literal or CIDR entry of the list covers them (an IPv6 address that
   carries an IPv4 one, NAT64, 6to4, Teredo and the like, is judged by the IPv4 address it
   carries: ``queues.addresses``), for a literal in the URL and for every address a name
   resolves to alike.
2. POST ``{"id", "queue", "payload", "topic", "content"}`` (``topic``/``content`` repeat
   ``queue``/``payload`` for clients of the seed) to the address that was checked (the name
   goes in the Host header and TLS SNI, so a second DNS answer can't move the connection),
   with the task id and attempt in headers (and ``X-Worqr-Batch``, the batch, for a batch's task
   or callback), so receivers can be idempotent: deliveries are
   at-least-once. A task that expired before it ran (``expires=``) is not POSTed; its callback
   gets instead a notice ``{"id", "queue", "outcome": "expired", "expires_at"}`` with the header
   ``X-Worqr-Outcome: expired`` (``engine.expired``), delivered like any callback task. With OpenTelemetry on, the POST is a CLIENT span whose W3C ``traceparent``
   (and ``tracestate``) headers are sent, so the receiver continues the task's trace.
3. Judge the reply:
   - HTTP 429, or a body ``{"code": 101}``: "too many requests": raise RetryLater after the
     ``Retry-After`` header or the task's backoff; no attempt is used up;
   - any 2xx, or a body ``{"code": 100}``: delivered;
   - anything else (another status, a redirect, a timeout, a refused connection): raise
     DeliveryFailed, a failed attempt the engine retries with backoff and, after the last, keeps
     in the failed set and the failure history. The error quotes at most 1 KiB of the reply.

Settings (Django side, in ``settings.WORQR``): ``CALLBACK_ALLOWED_HOSTS`` (see ``AllowList``;
empty, the default, means no callbacks) and ``CALLBACK_TIMEOUT`` (seconds for a whole
delivery, default 10).
"""

import email.utils
import http.client
import ipaddress
import json
import socket
import ssl
import time
from datetime import UTC, datetime
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from .addresses import describe, ip, is_public
from .conf import get_connection, setting
from .engine import expired, readmodel, tracing
from .engine.errors import InvalidInput, RetryLater, WorqrError
from .engine.numbers import MAX_RETRIES
from .engine.registry import HandlerSpec

DEFAULT_TIMEOUT = 10.0
#: Longest callback URL accepted (the engine's own limit).
MAX_URL_LENGTH = 2048
#: Only this much of a reply is read: enough for ``{"code": ...}`` and an error message.
MAX_REPLY_BYTES = 64 * 1024
#: Only this much of a reply body is quoted in a failed delivery's error.
ERROR_BODY_BYTES = 1024
USER_AGENT = "worqr-webhooks/1"
DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidCallback(InvalidInput):
    """A callback URL that is malformed, not http(s), or whose host is not allowed."""


class DeliveryFailed(WorqrError):
    """A delivery that did not succeed: a failed attempt."""


# -- the allow-list ------------------------------------------------------------------------


class AllowList:
    """``WORQR["CALLBACK_ALLOWED_HOSTS"]`` parsed. Entries, each with an optional ``:port``
    (then only that port is allowed; without one, any port):

    - ``"hooks.example.com"`` that name; ``".example.com"`` the domain and its subdomains;
      ``"*"`` any name (and any public IP literal). A name must resolve to public addresses.
    - ``"10.1.2.3"``, ``"[fd00::1]:8443"`` an IP literal; ``"10.0.0.0/8"`` a CIDR network (no
      port). These allow the addresses they cover even when private or loopback, whether the
      URL names the address or a name that resolves to it.
    """

    def __init__(self, entries):
        self.names, self.networks = [], []  # (name or ".domain" or "*", port), (network, port)
        for entry in entries:
            self._add(entry)

    def __bool__(self):
        return bool(self.names or self.networks)

    def _add(self, entry):
        bad = ImproperlyConfigured(
            f"WORQR['CALLBACK_ALLOWED_HOSTS']: {entry!r} is not a host name, IP address or CIDR network "
            "(with an optional :port)"
        )
        if not isinstance(entry, str) or not entry or not entry.isascii() or entry != entry.strip():
            raise bad
        entry = entry.lower()
        if "/" in entry:
            try:
                self.networks.append((ipaddress.ip_network(entry.strip("[]"), strict=False), None))
            except ValueError:
                raise bad from None
            return
        if ip(entry) is not None:  # a bare IPv6 literal: no port
            self.networks.append((ipaddress.ip_network(ip(entry)), None))
            return
        try:
            parts = urlsplit(f"//{entry}")
            host, port = parts.hostname, parts.port
        except ValueError:
            raise bad from None
        if not host or parts.netloc != entry or port == 0 or parts.username is not None:
            raise bad
        if ip(host) is not None:
            self.networks.append((ipaddress.ip_network(ip(host)), port))
        elif host == "*" or all(
            label.replace("-", "").replace("_", "").isalnum() for label in host.lstrip(".").split(".")
        ):
            self.names.append((host, port))
        else:
            raise bad

    def allows_name(self, host, port):
        host = host.lower().rstrip(".")
        return any(_name_matches(allowed, host) for allowed, allowed_port in self.names if allowed_port in (None, port))

    def covers(self, address, port):
        """True if an IP literal or CIDR entry allows ``address`` on ``port``."""
        return any(address in net for net, allowed_port in self.networks if allowed_port in (None, port))

    def allows_ip_literal(self, address, port):
        return self.covers(address, port) or (is_public(address) and any(n == "*" for n, _ in self.names))


def _name_matches(allowed, host):
    if allowed == "*":
        return True
    if allowed.startswith("."):
        return host == allowed[1:] or host.endswith(allowed)
    return host == allowed


def allow_list():
    """``WORQR["CALLBACK_ALLOWED_HOSTS"]`` as an AllowList (empty: callbacks are off)."""
    entries = setting("CALLBACK_ALLOWED_HOSTS", None) or []
    if not isinstance(entries, (list, tuple)):
        raise ImproperlyConfigured("WORQR['CALLBACK_ALLOWED_HOSTS'] must be a list of host names")
    return AllowList(entries)


def allowed_hosts():
    """``WORQR["CALLBACK_ALLOWED_HOSTS"]`` checked and lower-cased (empty: callbacks are off)."""
    allow_list()
    return [h.lower() for h in setting("CALLBACK_ALLOWED_HOSTS", None) or []]


def callback_timeout():
    """``WORQR["CALLBACK_TIMEOUT"]``: seconds a whole delivery may take (default 10)."""
    value = setting("CALLBACK_TIMEOUT", DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
        raise ImproperlyConfigured("WORQR['CALLBACK_TIMEOUT'] must be a number of seconds in (0, 3600]")
    return float(value)


# -- checking URLs -------------------------------------------------------------------------


class Target:
    """A checked callback URL: scheme, host (as written), port and the request path."""

    def __init__(self, url, scheme, host, port, path):
        self.url, self.scheme, self.host, self.port, self.path = url, scheme, host, port, path


def check_callback(url):
    """Return ``url`` if it may be called back, else raise InvalidCallback saying why. Names
    are not resolved here (that is done once per delivery, by ``resolve``)."""
    _target(url, allow_list())
    return url


def _target(url, allowed):
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
    if parts.scheme not in DEFAULT_PORTS:
        raise InvalidCallback("callback must be an http:// or https:// URL")
    if not parts.hostname:
        raise InvalidCallback("callback URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidCallback("callback URL must not carry credentials")
    if port == 0:
        raise InvalidCallback("callback URL has an invalid port")
    if not allowed:
        raise InvalidCallback("callbacks are disabled (WORQR['CALLBACK_ALLOWED_HOSTS'] is empty)")
    port = port or DEFAULT_PORTS[parts.scheme]
    host = parts.hostname
    address = ip(host)
    ok = allowed.allows_ip_literal(address, port) if address is not None else allowed.allows_name(host, port)
    if not ok:
        shown = f"[{host}]" if ":" in host else host
        why = f" ({describe(address)})" if address is not None and not is_public(address) else ""
        raise InvalidCallback(f"callback host {shown} (port {port}) is not in WORQR['CALLBACK_ALLOWED_HOSTS']{why}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(url, parts.scheme, host, port, path)


def resolve(target, allowed):
    """The addresses to connect to for ``target``, resolved once: those that are public or
    covered by an IP or CIDR entry of the allow-list. Raise DeliveryFailed if there is none."""
    literal = ip(target.host)
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise DeliveryFailed(f"callback host {target.host} does not resolve: {exc}") from None
    addresses = [a for a in dict.fromkeys(ip(info[4][0].split("%")[0]) for info in infos) if a is not None]
    usable = [a for a in addresses if is_public(a) or allowed.covers(a, target.port)]
    if not usable:
        refused = addresses[0] if addresses else "no address"
        raise DeliveryFailed(
            f"callback host {target.host} resolves to {refused}, {describe(refused)}; only an IP or CIDR "
            "entry of WORQR['CALLBACK_ALLOWED_HOSTS'] may allow it"
        )
    return usable


# -- delivering ----------------------------------------------------------------------------


class _Pinned:
    """An http.client connection to one checked address, whatever the name resolves to now."""

    def connect(self):
        sock = socket.create_connection((str(self.address), self.port), self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self.wrap(sock)

    def wrap(self, sock):
        return sock


class _PinnedHTTP(_Pinned, http.client.HTTPConnection):
    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout)
        self.address = address


class _PinnedHTTPS(_Pinned, http.client.HTTPSConnection):
    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self.address = address

    def wrap(self, sock):
        return self._context.wrap_socket(sock, server_hostname=self.host)  # SNI and the certificate's name


def body_of(task):
    payload = task.payload
    if isinstance(payload, bytes):  # enqueued from Python as bytes: JSON carries text only
        payload = payload.decode("utf-8", "replace")
    elif isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return {"id": task.id, "queue": task.queue, "payload": payload, "topic": task.queue, "content": payload}


def deliver(task):
    """The handler of callback tasks: POST the task to its callback URL (see the module doc)."""
    allowed = allow_list()
    try:
        target = _target(task.callback, allowed)
    except InvalidCallback as exc:  # the allow-list changed since the task was created
        raise DeliveryFailed(str(exc)) from None
    deadline = time.monotonic() + callback_timeout()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Worqr-Task": task.id,
        "X-Worqr-Queue": task.queue,
        "X-Worqr-Attempt": str(task.attempt),
        "Idempotency-Key": task.id,
    }
    if task.batch_id:  # a batch's task, or a batch's callback: the batch it is about
        headers["X-Worqr-Batch"] = task.batch_id
    original = expired.expired_of(task)
    if original is not None:  # the notice that a task expired: its body is the payload
        headers.update(
            {"X-Worqr-Task": original, "X-Worqr-Outcome": "expired", "Idempotency-Key": f"{original}:expired"}
        )
        data = task.payload.encode() if isinstance(task.payload, str) else task.payload
    else:
        data = json.dumps(body_of(task)).encode()
    try:
        with _span(target, headers) as record_status:
            status, reply_headers, body = _post(target, resolve(target, allowed), data, headers, deadline)
            record_status(status)
    except (OSError, http.client.HTTPException, ValueError) as exc:  # refused, reset, timeouts, TLS
        raise DeliveryFailed(f"POST {target.url} failed: {exc}") from None
    judge(task, target.url, status, reply_headers, body)


def _span(target, headers):
    """The delivery's OpenTelemetry CLIENT span (a child of the task's run span), which adds the
    W3C trace headers to ``headers``; or nothing, when tracing is off. The URL it records leaves
    the query out (it may carry the receiver's secret)."""
    if not tracing.enabled(get_connection().config):
        return tracing.no_span()
    url = target.url.split("?", 1)[0].split("#", 1)[0]
    return tracing.client_span("POST", url, target.host, target.port, headers)


def _post(target, addresses, data, headers, deadline):
    """``(status, headers, body)`` of the POST, sent to the first of ``addresses`` (all checked)
    that accepts the connection."""
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    for i, address in enumerate(addresses):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        conn = kind(target.host, target.port, address, left)
        try:
            try:
                conn.connect()
            except ConnectionError:
                if i + 1 < len(addresses):
                    continue
                raise
            conn.request("POST", target.path, body=data, headers=headers)
            reply = conn.getresponse()
            return reply.status, reply.headers, _read(reply, deadline)
        finally:
            conn.close()
    raise ConnectionError("no address to connect to")


def _read(reply, deadline):
    chunks, size = [], 0
    while size < MAX_REPLY_BYTES:
        if time.monotonic() > deadline:
            raise TimeoutError("the reply took longer than WORQR['CALLBACK_TIMEOUT']")
        chunk = reply.read1(min(16384, MAX_REPLY_BYTES - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def reply_code(body):
    """The ``code`` of a seed-style JSON reply ``{"code": 100}``, or None."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    code = data.get("code") if isinstance(data, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def judge(task, url, status, headers, body):
    """Return on success, raise RetryLater for "too many requests", DeliveryFailed otherwise."""
    code = reply_code(body)
    if status == 429 or code == 101:
        delay = retry_after(headers.get("Retry-After")) if headers is not None else None
        if delay is None:
            delay = backoff_of(task)
        raise RetryLater(delay, f"callback {url} answered too many requests (HTTP {status}); retrying in {delay:g} s")
    if 200 <= status < 300 or code == 100:
        return
    quoted = " ".join(body[:ERROR_BODY_BYTES].decode("utf-8", "replace").split())
    if len(body) > ERROR_BODY_BYTES:
        quoted += " …"
    raise DeliveryFailed(f"callback {url} answered HTTP {status}" + (f": {quoted}" if quoted else ""))


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
    return min(base * 2 ** min(max(task.attempt - 1, 0), MAX_RETRIES), config.backoff_max)  # (as failure.lua)


def worker_callback_handler():
    """The HandlerSpec the worker runs callback tasks with, or None when callbacks are off."""
    if not allow_list():
        return None
    callback_timeout()  # a bad setting stops the worker at start, not at the first delivery
    return HandlerSpec(queue="callbacks", func=deliver, is_async=False)
