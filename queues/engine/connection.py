"""The Redis connection and configuration the engine runs with.

The Django layer calls ``configure(config, url)`` once; engine objects created without an
explicit ``Connection`` use that default. Responses are never decoded: payloads are raw bytes.
"""

import asyncio
import threading

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from .config import Config
from .errors import ConfigurationError

_default = None
_lock = threading.Lock()

#: What a lost, refused or timed-out Redis link raises: callers retry with backoff on these.
NETWORK_ERRORS = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    OSError,
    asyncio.TimeoutError,
)


def raise_if_cancelling():
    """Re-raise a cancellation that redis-py turned into a network error (a connection closed
    while its reader was being cancelled): loops that retry network errors call this first, so
    that cancelling them (a worker stopping) always ends them."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Connection:
    """A Redis URL, a config, and a lazily created synchronous client shared by a process."""

    def __init__(self, url, config=None):
        """``url`` is a Redis URL, or a function returning one (called once, on first use)."""
        if not url:
            raise ConfigurationError("a Redis URL is required")
        self._url = url
        self.config = config or Config(redis_url=url if isinstance(url, str) else "")
        self._client = None
        self._enqueue_client = None

    @property
    def url(self):
        if callable(self._url):
            self._url = self._url()
        return self._url

    @property
    def client(self):
        if self._client is None:
            self._client = redis.Redis.from_url(self.url, health_check_interval=30, **self._tcp_options())
        return self._client

    @property
    def enqueue_client(self):
        """The client enqueues run on: one attempt per call (``Queue`` retries, for at most
        ``ENQUEUE_RETRY_FOR``) and timeouts, so an enqueue from a web request never hangs on a
        Redis that is down, stopped or cut off."""
        if self._enqueue_client is None:
            self._enqueue_client = redis.Redis.from_url(
                self.url,
                socket_connect_timeout=1.0,
                socket_timeout=5.0,
                retry=Retry(NoBackoff(), 0),
                **self._tcp_options(),
            )
        return self._enqueue_client

    def async_client(self, max_connections=None):
        """A new asyncio client (one per event loop). Its pool makes callers wait for a free
        connection rather than fail when all are busy."""
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            self.url, max_connections=max_connections or 50, timeout=None, **self._tcp_options()
        )
        return redis.asyncio.Redis.from_pool(pool)

    def _tcp_options(self):
        return {} if self.url.startswith("unix:") else {"socket_keepalive": True}

    def close(self):
        for client in (self._client, self._enqueue_client):
            if client is not None:
                client.close()
        self._client = self._enqueue_client = None


def configure(config, url=None):
    """Set the process's default connection."""
    global _default
    with _lock:
        if _default is not None:
            _default.close()
        _default = Connection(url or config.redis_url, config)
    return _default


def get_default():
    if _default is None:
        raise ConfigurationError(
            "worqr has no Redis connection: call queues.engine.connection.configure(...) "
            "or run inside the Django project (the queues app configures it)"
        )
    return _default
