"""The Redis connection and configuration the engine runs with.

The Django layer calls ``configure(config, url)`` once; engine objects created without an
explicit ``Connection`` use that default. Responses are never decoded: payloads are raw bytes.
"""

import asyncio
import random
import threading
from dataclasses import dataclass, field

import redis
import redis.asyncio
import redis.asyncio.client
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # hiredis is optional for redis-py: its own packing then
    _hiredis_pack = None

try:
    from redis.maint_notifications import MaintNotificationsConfig
except ImportError:  # redis-py 5.x (the benchmark's producer only; worqr needs 8.1): nothing to turn off
    MaintNotificationsConfig = None

from .config import ENQUEUE_CONNECT_TIMEOUT, Config
from .errors import ConfigurationError

_default = None
_lock = threading.Lock()

#: What a lost, refused or timed-out Redis link raises: callers retry with backoff on these.
#: A Redis Cluster also answers for a while, after a node failed or restarted, that it is down
#: (CLUSTERDOWN, and MASTERDOWN from a replica cut off from its master), that it moves a slot
#: (TRYAGAIN), or the client finds no node for a slot: those pass as an outage does.
NETWORK_ERRORS = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
    ConnectionError,
    OSError,
    asyncio.TimeoutError,
)


def is_noscript(exc):
    """Whether ``exc`` is Redis saying it does not have a script (EVALSHA of one not loaded yet,
    or flushed): the caller loads it and calls again."""
    return isinstance(exc, redis.exceptions.NoScriptError) or (
        isinstance(exc, redis.exceptions.ResponseError) and str(exc).startswith("NOSCRIPT")
    )


def raise_if_cancelling():
    """Re-raise a cancellation that redis-py turned into a network error (a connection closed
    while its reader was being cancelled): loops that retry network errors call this first, so
    that cancelling them (a worker stopping) always ends them."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _honoured(reply):
    """``reply``, unless the task awaiting it is being cancelled: then CancelledError."""
    raise_if_cancelling()
    return reply


# The asyncio clients worqr makes raise a cancellation that came while a command was under way
# even when the command completed. On Python 3.11, redis-py writes a command under
# ``asyncio.wait_for`` (its socket timeout), which swallows a cancel that lands as the write
# completes: the command returns normally and the task, asked to stop, goes on (a loop that
# awaits only Redis and sleeps never ends: a worker's stop waited 5 s for its heartbeat).


class _Pipeline(redis.asyncio.client.Pipeline):
    async def execute(self, raise_on_error=True):
        return _honoured(await super().execute(raise_on_error))


class _PubSub(redis.asyncio.client.PubSub):
    async def execute_command(self, *args):
        return _honoured(await super().execute_command(*args))


class _HiredisPacking:
    """An asyncio connection that packs its commands with hiredis (C), as redis-py's synchronous
    connections do, instead of redis-py's asyncio packer (Python, a join per argument): the
    ``start`` call of a busy worker carries four arguments per task it acknowledges. The bytes
    sent are the same; what hiredis refuses (an argument of another type, a memoryview) goes
    through redis-py's own packer, which packs it or raises its own error."""

    def pack_command(self, *args):
        if isinstance(args[0], str):  # a command name may carry arguments ('CONFIG GET')
            args = (*args[0].encode().split(), *args[1:])
        elif b" " in args[0]:
            args = (*args[0].split(), *args[1:])
        try:
            return [_hiredis_pack(args)]
        except TypeError:
            return super().pack_command(*args)


_packing_classes = {}


def _hiredis_packing(cls):
    """``cls`` (an asyncio connection class) packing with hiredis, or ``cls`` without hiredis."""
    if _hiredis_pack is None:
        return cls
    if cls not in _packing_classes:
        _packing_classes[cls] = type(f"Hiredis{cls.__name__}", (_HiredisPacking, cls), {})
    return _packing_classes[cls]


def _pack_cluster_with_hiredis(client):
    """Make a new asyncio cluster client's connections pack with hiredis: the class its nodes
    connect with (its seed nodes', made before any connection, and the nodes it finds later,
    made from the connection keywords it shares with its nodes manager)."""
    kwargs = client.connection_kwargs
    packing = _hiredis_packing(kwargs.get("connection_class", redis.asyncio.Connection))
    kwargs["connection_class"] = packing
    for node in [*client.startup_nodes, *client.nodes_manager.startup_nodes.values()]:
        node.connection_class = packing


class _SentinelPool(redis.asyncio.sentinel.SentinelConnectionPool):
    """A Sentinel-managed master's pool whose connections pack with hiredis."""

    def __init__(self, service_name, sentinel_manager, **kwargs):
        super().__init__(service_name, sentinel_manager, **kwargs)
        self.connection_class = _hiredis_packing(self.connection_class)


class _Redis(redis.asyncio.Redis):
    async def execute_command(self, *args, **options):
        return _honoured(await super().execute_command(*args, **options))

    def pipeline(self, transaction=True, shard_hint=None):
        return _Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)

    def pubsub(self, **kwargs):
        return _PubSub(self.connection_pool, event_dispatcher=self._event_dispatcher, **kwargs)


class _ClusterPipeline(redis.asyncio.cluster.ClusterPipeline):
    async def execute(self, raise_on_error=True, allow_redirections=True):
        return _honoured(await super().execute(raise_on_error, allow_redirections))


class _Cluster(redis.asyncio.RedisCluster):
    async def execute_command(self, *args, **options):
        return _honoured(await super().execute_command(*args, **options))

    def pipeline(self, transaction=None, shard_hint=None):
        if shard_hint:
            raise redis.exceptions.RedisClusterException("shard_hint is deprecated in cluster mode")
        return _ClusterPipeline(self, transaction)


#: redis-py 8 answers the truthy "auto" when asked whether maintenance notifications (Redis
#: Enterprise's push messages about a coming move) are on, and then skips, in its asyncio pools,
#: the check that a pooled connection is still open before handing it out: every command sent
#: on a connection the server had closed while it was idle (CLIENT KILL, a client timeout, a
#: restart) failed with "Connection closed by server". worqr uses no such notifications.
NO_MAINTENANCE_NOTIFICATIONS = MaintNotificationsConfig and MaintNotificationsConfig(enabled=False)

#: Connections a synchronous client's pool may open (per node of a cluster). redis-py 8 caps its
#: pools at 100 and then raises MaxConnectionsError: a worker whose sync handlers use its clients
#: (``get_default().client``, an enqueue) from more than 100 threads at once would fail tasks.
#: Connections are opened only as they are needed; a URL's ``max_connections`` wins.
SYNC_MAX_CONNECTIONS = 10_000

#: URL schemes of a Redis Cluster (``rediss+``: TLS) and of a Sentinel-managed master.
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")


@dataclass(frozen=True)
class Target:
    """Where a worqr URL points: ``kind`` is ``redis`` (one server: redis-py's own URL),
    ``cluster`` or ``sentinel``; ``nodes`` the listed host:port pairs; ``service`` and ``db`` the
    Sentinel service name and database; ``options`` the connection keywords (credentials, TLS,
    timeouts from the query string, parsed by redis-py); ``sentinel_options`` those of the
    Sentinels themselves (``sentinel_username`` / ``sentinel_password`` in the query)."""

    kind: str
    url: str
    nodes: tuple = ()
    service: str = ""
    db: int = 0
    options: dict = field(default_factory=dict)
    sentinel_options: dict = field(default_factory=dict)


def parse(url):
    """The ``Target`` of a worqr Redis URL; raises ConfigurationError naming what is wrong.

    - ``redis://``, ``rediss://``, ``unix://``: one server (as redis-py reads them);
    - ``redis+cluster://[user:password@]host:port[,host:port...][/][?options]``: a Redis Cluster
      (any listed node seeds the topology);
    - ``redis+sentinel://[user:password@]host:port[,host:port...]/<service>[/<db>][?options]``:
      the master of ``service``, found through those Sentinels (and found again after a failover).

    ``rediss+cluster`` / ``rediss+sentinel`` use TLS. Credentials are the data nodes'."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigurationError(f"not a Redis URL: {url!r}")
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme not in CLUSTER_SCHEMES + SENTINEL_SCHEMES:
        return Target("redis", url)
    rest, _, query = rest.partition("?")
    userinfo, at, hostpart = rest.rpartition("@")
    hosts, _, path = hostpart.partition("/")
    nodes = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(f"{scheme} URL: {item.strip()!r} is not host:port (in {_safe(url)})")
        nodes.append((host.strip("[]"), int(port)))
    tls = scheme.startswith("rediss")
    # redis-py parses credentials and the query string (types and all) from a one-host URL.
    one = f"{'rediss' if tls else 'redis'}://{userinfo}{at}{nodes[0][0]}:{nodes[0][1]}/0" + (
        f"?{query}" if query else ""
    )
    try:
        options = redis.connection.parse_url(one)
    except ValueError as exc:
        raise ConfigurationError(f"{scheme} URL: {exc} (in {_safe(url)})") from None
    for name in ("host", "port", "db", "path"):
        options.pop(name, None)
    if options.pop("connection_class", None) is not None or tls:
        options["ssl"] = True
    sentinel_options = {k[len("sentinel_") :]: options.pop(k) for k in list(options) if k.startswith("sentinel_")}
    parts = [x for x in path.split("/") if x]
    if scheme in CLUSTER_SCHEMES:
        if parts and parts != ["0"]:
            raise ConfigurationError(f"{scheme} URL: a Redis Cluster has only database 0 (in {_safe(url)})")
        return Target("cluster", url, tuple(nodes), options=options)
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ConfigurationError(
            f"{scheme} URL: the path must be /<service>[/<db>], e.g. redis+sentinel://host:26379/mymaster/0 "
            f"(in {_safe(url)})"
        )
    db = int(parts[1]) if len(parts) == 2 else 0
    return Target(
        "sentinel", url, tuple(nodes), service=parts[0], db=db, options=options, sentinel_options=sentinel_options
    )


def _safe(url):
    """``url`` without its password, for error messages."""
    scheme, _, rest = url.partition("://")
    userinfo, at, hosts = rest.rpartition("@")
    return f"{scheme}://{userinfo.partition(':')[0] + ':***@' if at else ''}{hosts}"


def is_cluster(client):
    """Whether ``client`` (sync or asyncio) talks to a Redis Cluster."""
    return isinstance(client, (redis.RedisCluster, redis.asyncio.RedisCluster))


class _NodePubSub(_PubSub):
    """A subscription on one node of a cluster, on a pool of its own that closes with it."""

    async def aclose(self):
        try:
            await super().aclose()
        finally:
            await self.connection_pool.disconnect()


async def apubsub(client):
    """A new PubSub of an asyncio client. On a Redis Cluster, worqr uses plain (not sharded)
    pub/sub, which every node relays to every other: the subscription goes to one node, picked
    at random among those the cluster lists now (after a failover or a node change the caller's
    retry lands on a live one), on a plain connection, so that ``subscribe`` and ``psubscribe``
    of any channel or pattern work as on one Redis."""
    if not is_cluster(client):
        return client.pubsub()
    await client.nodes_manager.initialize()
    node = random.choice(client.get_nodes())
    kwargs = {k: v for k, v in node.connection_kwargs.items() if k not in ("host", "port")}
    pool = redis.asyncio.ConnectionPool(
        connection_class=node.connection_class, host=node.host, port=node.port, **kwargs
    )
    return _NodePubSub(connection_pool=pool)


class Connection:
    """A Redis URL, a config, and a lazily created synchronous client shared by a process."""

    def __init__(self, url, config=None):
        """``url`` is a Redis URL, or a function returning one (called once, on first use)."""
        if not url:
            raise ConfigurationError("a Redis URL is required")
        if isinstance(url, str):
            parse(url)  # a bad URL is an error now, not at the first command
        self._url = url
        self.config = config or Config(redis_url=url if isinstance(url, str) else "")
        self._client = None
        self._target = None
        self._enqueue_client = None

    @property
    def url(self):
        if callable(self._url):
            self._url = self._url()
        return self._url

    @property
    def target(self):
        if self._target is None:
            self._target = parse(self.url)
        return self._target

    @property
    def kind(self):
        """``redis``, ``cluster`` or ``sentinel``."""
        return self.target.kind

    def _mark(self, client):
        """Tell the scripts layer to WAIT for replicas after durable writes (MIN_REPLICAS_ACK)."""
        if self.config.min_replicas_ack > 0:
            client.worqr_replicas = (self.config.min_replicas_ack, int(self.config.replicas_ack_timeout * 1000))
        return client

    @property
    def client(self):
        if self._client is None:
            self._client = self._sync_client({"health_check_interval": 30})
        return self._client

    def _sync_client(self, extra):
        t = self.target
        pool = {"max_connections": SYNC_MAX_CONNECTIONS}
        if t.kind == "cluster":
            nodes = [redis.cluster.ClusterNode(h, p) for h, p in t.nodes]
            extra = {k: v for k, v in extra.items() if k not in ("health_check_interval", "retry")}
            client = redis.RedisCluster(startup_nodes=nodes, **{**pool, **self._tcp_options(), **t.options, **extra})
        elif t.kind == "sentinel":
            options = {**pool, **self._tcp_options(), **t.options, **extra}
            options.pop("health_check_interval", None)
            client = self._sentinel(redis.sentinel.Sentinel).master_for(t.service, db=t.db, **options)
        else:
            client = redis.Redis.from_url(self.url, **pool, **self._tcp_options(), **extra)
        return self._mark(client)

    @property
    def enqueue_client(self):
        """The client enqueues run on: one attempt per call (``Queue`` retries, for at most
        ``ENQUEUE_RETRY_FOR``) and timeouts, so an enqueue from a web request never hangs on a
        Redis that is down, stopped or cut off."""
        if self._enqueue_client is None:
            c = self.config
            self._enqueue_client = self._sync_client(
                {
                    "socket_connect_timeout": min(ENQUEUE_CONNECT_TIMEOUT, c.enqueue_socket_timeout),
                    "socket_timeout": c.enqueue_attempt_timeout,
                    "retry": Retry(NoBackoff(), 0),
                }
            )
        return self._enqueue_client

    def async_client(self, max_connections=None, timeout=None):
        """A new asyncio client (one per event loop). Its pool makes callers wait for a free
        connection rather than fail when all are busy (on one Redis; a cluster client opens
        connections per node as needed). ``timeout``: seconds a connect or a reply may take
        (None: redis-py's 5 s, unless the URL says)."""
        t = self.target
        extra = {"maint_notifications_config": NO_MAINTENANCE_NOTIFICATIONS} if NO_MAINTENANCE_NOTIFICATIONS else {}
        if timeout is not None:
            extra.update(socket_timeout=timeout, socket_connect_timeout=timeout)
        if t.kind == "cluster":
            nodes = [redis.asyncio.cluster.ClusterNode(h, p) for h, p in t.nodes]
            client = _Cluster(startup_nodes=nodes, **{**self._tcp_options(), **t.options, **extra})
            _pack_cluster_with_hiredis(client)
        elif t.kind == "sentinel":
            client = self._sentinel(redis.asyncio.sentinel.Sentinel).master_for(
                t.service, db=t.db, redis_class=_Redis, connection_pool_class=_SentinelPool, **extra
            )
        else:
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                self.url, max_connections=max_connections or 50, timeout=None, **self._tcp_options(), **extra
            )
            pool.connection_class = _hiredis_packing(pool.connection_class)
            client = _Redis.from_pool(pool)
        return self._mark(client)

    def _sentinel(self, cls):
        t = self.target
        kw = {**self._tcp_options(), "socket_connect_timeout": 1.0, "socket_timeout": 1.0}
        return cls(list(t.nodes), sentinel_kwargs={**kw, **t.sentinel_options}, **self._tcp_options(), **t.options)

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
