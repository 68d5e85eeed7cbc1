"""Loads the Lua scripts in ``lua/`` and runs them by EVALSHA, falling back to SCRIPT LOAD.

Each script is ``lua/<name>-<number of keys>.lua`` and opens with a header (purpose, input,
output, events) that also declares, for the loader:

    -- Keys: pending front stats ...     the queue keys it takes, in KEYS order
                                         (kinds of ``keys.QUEUE_KINDS``)
    -- @include locks                    a helper file ``lua/includes/locks.lua``

The loader checks the key count against the file name, inlines each include once (includes may
include others; dependencies first), prepends ``local K = {<kind> = KEYS[i], ...}`` and refuses
a script whose code uses a ``K.<kind>`` it did not declare. Placeholders ``@@name@@`` are filled
from ``keys`` (``@@task@@``, ``@@lock@@``... and ``@@events@@``, ``@@control@@``), ``codes``
(``@@STALE@@``...), ``durations`` and ``task`` (``@@payload_fields@@``, ``@@payload_piece@@``...),
so key names, reply codes, histogram bounds and the payload's fields are each defined in one
Python module. ARGV[1] is always the queue's key prefix and ARGV[2] the
queue name; the calls themselves are built in ``commands``.
"""

import hashlib
import logging
import re
from collections import Counter
from functools import cache, lru_cache
from pathlib import Path

import redis.asyncio
from redis.exceptions import AskError, ClusterDownError, ResponseError, TryAgainError

from . import direct, durations, keys, limits, task
from .codes import lua_placeholders
from .connection import NETWORK_ERRORS, is_cluster, is_noscript
from .errors import NotReplicated

log = logging.getLogger("worqr")

LUA_DIR = Path(__file__).with_name("lua")

_KEYS_RE = re.compile(r"^-- Keys:(.*)$", re.M)
_INCLUDE_RE = re.compile(r"^-- @include (\S+)\s*$", re.M)
_K_USE_RE = re.compile(r"\bK\.([A-Za-z_]\w*)")
_PLACEHOLDER_RE = re.compile(r"@@(\w+)@@")


class ScriptError(RuntimeError):
    """A Lua script file that the loader refuses (bad key count, unknown include...)."""


def _placeholders():
    values = dict(keys.SUBKEY_KINDS)
    values.update(
        events=keys.EVENTS,
        ended="ended",
        kept="kept",
        resend="resend",
        expired="expired",
        holds="holds",
        expired_max=str(keys.EXPIRED_MAX),
        history="history",
        hcompleted="hcompleted",
        hcancelled="hcancelled",
        hfailed="hfailed",
        again="again",
        history_payload_max=str(keys.HISTORY_PAYLOAD_MAX),
        history_log_lines=str(keys.HISTORY_LOG_LINES),
        ended_keep_ms=str(keys.ENDED_KEEP_MS),
        ended_max=str(keys.ENDED_MAX),
        ended_trim_max=str(keys.ENDED_TRIM_MAX),
        start_grace_divisor=str(round(1 / limits.START_GRACE_FRACTION)),
        start_grace_min_ms=str(int(limits.START_GRACE_MIN * 1000)),
        start_grace_max_ms=str(int(limits.START_GRACE_MAX * 1000)),
        control=keys.CONTROL_PREFIX,
        duration_bounds=durations.lua_bounds(),
        duration_limits=durations.lua_limits(),
        timings="timings",
        timing_levels=durations.lua_levels(),
        timings_ttl_ms=str(durations.TIMINGS_TTL_MS),
        handlers_max=str(durations.HANDLERS_MAX),
        batch_events=keys.BATCH_EVENTS,
        task_log_max=str(keys.TASK_LOG_MAX),
        payload_piece=str(task.PAYLOAD_PIECE),
        payload_pieces_max=str(task.PAYLOAD_PIECES_MAX),
        payload_fields=", ".join(f"'{f}'" for f in task.PAYLOAD_FIELDS[:3]),
        payload_more_fields=", ".join(f"'{f}'" for f in task.PAYLOAD_FIELDS[3:]),
    )
    values.update(lua_placeholders())
    return values


class Script:
    """One Lua script: its name, the queue key kinds it takes, its full source and SHA1."""

    def __init__(self, name, kinds, source):
        self.name, self.kinds, self.source = name, tuple(kinds), source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    @property
    def numkeys(self):
        return len(self.kinds)

    def __repr__(self):
        return f"<Script {self.name}-{self.numkeys}>"


def _read_include(lua_dir, name, path_of):
    path = lua_dir / "includes" / f"{name}.lua"
    if not path.is_file():
        raise ScriptError(f"{path_of}: unknown include {name!r} (no {path.relative_to(lua_dir)})")
    return path.read_text()


def _resolve_includes(lua_dir, text, path_of, seen, order, stack=()):
    for name in _INCLUDE_RE.findall(text):
        if name in stack:
            raise ScriptError(f"{path_of}: include cycle {' -> '.join((*stack, name))}")
        if name in seen:
            continue
        body = _read_include(lua_dir, name, path_of)
        _resolve_includes(lua_dir, body, f"includes/{name}.lua", seen, order, (*stack, name))
        seen.add(name)
        order.append(body)


_FUNCTION_START_RE = re.compile(r"local function (\w+)\(")


def _helpers(code):
    """(name, first line, line after) of each top-level helper of ``code``: ``local function
    name(...)`` in column 0, up to its ``end`` in column 0 (or on the same line: a one-liner)."""
    lines, out, i = code.split("\n"), [], 0
    while i < len(lines):
        m = _FUNCTION_START_RE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i
        if not lines[i].rstrip().endswith(" end"):
            while j < len(lines) and lines[j] != "end":
                j += 1
        out.append((m.group(1), i, j + 1))
        i = j + 1
    return lines, out


_WORD_RE = re.compile(r"\w+")


def _prune(includes, text):
    """The includes' code without the helpers nothing in the script uses, then ``text``. Every
    helper is a closure made on each call of the script, so an unused one costs every call for
    nothing; a helper used only by removed ones goes too. The words of the code are counted once
    (a helper is unused when its name is counted only in its own lines), not searched for helper
    by helper over the whole text: every process builds all the scripts once, at its first call."""
    lines, helpers = _helpers(includes)
    words = Counter(_WORD_RE.findall(includes)) + Counter(_WORD_RE.findall(text))
    helpers = [
        (name, first, after, Counter(_WORD_RE.findall("\n".join(lines[first:after])))) for name, first, after in helpers
    ]
    removed = True
    while removed:
        removed = False
        for name, first, after, own in reversed(helpers):
            if lines[first] is not None and words[name] == own[name]:  # named only in its own lines
                for word, n in own.items():
                    words[word] -= n
                lines[first:after] = [None] * (after - first)
                removed = True
    return "\n".join(line for line in lines if line is not None) + "\n" + text


def build(path, lua_dir=LUA_DIR):
    """The Script of one file, checked; raises ScriptError with the file and the problem."""
    name, _, count = path.stem.rpartition("-")
    if not name or not count.isdigit():
        raise ScriptError(f"{path.name}: Lua script names end in -<number of keys>")
    text = path.read_text()
    declared = _KEYS_RE.findall(text)
    if len(declared) != 1:
        raise ScriptError(f"{path.name}: the header must declare its keys once ('-- Keys: ...')")
    kinds = declared[0].split()
    unknown = [k for k in kinds if k not in keys.QUEUE_KINDS and k not in keys.BATCH_KINDS]
    if unknown or len(set(kinds)) != len(kinds):
        raise ScriptError(f"{path.name}: unknown or repeated key kinds {unknown or kinds}")
    if len(kinds) != int(count):
        raise ScriptError(f"{path.name}: declares {len(kinds)} keys but its name says {count}")
    parts = []
    _resolve_includes(lua_dir, text, path.name, set(), parts)
    full = "\n".join([*parts, text])
    missing = sorted(set(_K_USE_RE.findall(full)) - set(kinds))
    if missing:
        raise ScriptError(f"{path.name}: uses keys it does not declare: {', '.join(missing)}")
    if re.search(r"\bK\[", full):
        raise ScriptError(f"{path.name}: index K by name (K.<kind>), never K[...]")
    body = _prune("\n".join(parts), text)
    values = _placeholders()

    def fill(m):
        if m.group(1) not in values:
            raise ScriptError(f"{path.name}: unknown placeholder {m.group(0)}")
        return values[m.group(1)]

    body = _PLACEHOLDER_RE.sub(fill, body)
    header = "local K = {" + ", ".join(f"{k} = KEYS[{i}]" for i, k in enumerate(kinds, 1)) + "}\n"
    return Script(name, kinds, header + body)


@cache
def get(name, lua_dir=LUA_DIR):
    """The Script ``name``, read and checked once per process, at its first use: a process
    builds only the scripts it runs (a producer, one or two; building all of them took 0.16 to
    0.37 s, which every process paid at its first call). KeyError for a name with no file."""
    found = [p for p in Path(lua_dir).glob(f"{name}-*.lua") if p.stem.rpartition("-")[0] == name]
    if len(found) != 1:
        raise KeyError(name)
    return build(found[0], Path(lua_dir))


def load_all(lua_dir=LUA_DIR):
    """{name: Script} for every script file (each built once per process, as ``get``)."""
    names = sorted(p.stem.rpartition("-")[0] for p in Path(lua_dir).glob("*.lua"))
    return {name: get(name, lua_dir) for name in names}


@lru_cache(maxsize=8192)
def _keys_and_head(name, queue):
    script = get(name)
    return tuple(keys.queue_key(queue, kind) for kind in script.kinds) + (keys.queue_prefix(queue), queue)


def run(client, name, queue, *args, durable=None):
    """Run script ``name`` for ``queue`` on a synchronous client. ``durable`` (``strict`` or
    ``log``): a write that must reach ``MIN_REPLICAS_ACK`` replicas (see ``_replicated``)."""
    script = get(name)
    fixed = _keys_and_head(name, queue)
    want = getattr(client, "worqr_replicas", None) if durable else None
    if want:
        return _run_waiting(client, script, queue, fixed + args, want, durable)
    road = direct.for_client(client)
    if road is not None:  # a plain Redis: the short road
        return road.run(script, fixed, args)
    argv = fixed + args
    try:
        return client.evalsha(script.sha, script.numkeys, *argv)
    except ResponseError as exc:
        if not is_noscript(exc):
            raise
        client.script_load(script.source)
        return client.evalsha(script.sha, script.numkeys, *argv)


async def arun(client, name, queue, *args, durable=None):
    """Run script ``name`` for ``queue`` on an asyncio client (``durable``: as ``run``)."""
    script = get(name)
    fixed = _keys_and_head(name, queue)
    want = getattr(client, "worqr_replicas", None) if durable else None
    if want:
        return await _arun_waiting(client, script, queue, fixed + args, want, durable)
    road = direct.for_async(client)
    if road is not None:  # a plain Redis: the short road
        return await road.run(script, fixed, args)
    argv = fixed + args
    try:
        return await client.evalsha(script.sha, script.numkeys, *argv)
    except ResponseError as exc:
        if not is_noscript(exc):
            raise
        await client.script_load(script.source)
        return await client.evalsha(script.sha, script.numkeys, *argv)


# -- writes that wait for replicas (MIN_REPLICAS_ACK) -----------------------------------------
#
# WAIT counts the replicas that have every write made so far *on the same connection*, so the
# script and its WAIT go in one pipeline on one connection to the master of the queue's slot
# (on a cluster: that node's own client, not the cluster client, which could route WAIT to any
# node). A MOVED reply (the slot moved: a failover) means the script did not run: the topology
# is read again and the call made again.


def _is_moved(exc):
    """A reply saying the slot is served elsewhere or not now (redis-py maps MOVED and ASK to
    MovedError/AskError, whose text no longer starts with the code)."""
    if isinstance(exc, (AskError, ClusterDownError, TryAgainError)):  # MovedError is an AskError
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith(("MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN"))


def _replicated(name, queue, reply, acked, want, durable):
    wanted, timeout_ms = want
    if int(acked) >= wanted:
        return reply
    message = f"{name} for queue {queue}: {acked} of {wanted} replica(s) had the write within {timeout_ms} ms"
    if durable == "strict":
        exc = NotReplicated(message + "; a failover now could lose it", wanted, int(acked))
        exc.reply = reply
        raise exc
    log.warning("worqr: %s", message)
    return reply


def _run_waiting(client, script, queue, argv, want, durable):
    for attempt in range(4):
        target = client.get_redis_connection(client.get_node_from_key(argv[0])) if is_cluster(client) else client
        p = target.pipeline(transaction=False)
        p.evalsha(script.sha, script.numkeys, *argv)
        p.execute_command("WAIT", *want)
        try:
            reply, acked = p.execute(raise_on_error=False)
        except NETWORK_ERRORS:
            if is_cluster(client):
                _refresh(client)
            raise
        if isinstance(reply, Exception):
            if is_noscript(reply):
                target.script_load(script.source)
                continue
            if is_cluster(client) and _is_moved(reply) and attempt < 3:
                _refresh(client)
                continue
            raise reply
        if int(acked) < want[0]:
            recheck_master(target)
        return _replicated(script.name, queue, reply, acked, want, durable)
    raise RuntimeError(f"{script.name}: could not run it on the master of queue {queue}")


def recheck_master(client):
    """A write short of replicas, through Sentinel: ask the Sentinels where the master is. After a
    SENTINEL FAILOVER the old master takes writes (with no replica left) until it is demoted, up to
    10 s later; this moves the client's idle connections to the new master now."""
    pool = getattr(client, "connection_pool", None)  # none on a Redis Cluster client
    if hasattr(pool, "get_master_address"):
        try:
            before = pool.master_address
            if pool.get_master_address() != before:  # connections in use too: they'd come back
                pool.disconnect(inuse_connections=True)
        except Exception:  # no master known right now: the next call finds out
            pass


async def arecheck_master(client):
    """``recheck_master`` for an asyncio client; also called by each worker's heartbeat (with
    MIN_REPLICAS_ACK), so that an idle worker (which writes nothing that could come back short of
    replicas) leaves the old master within a beat or two of the Sentinels naming the new one, its
    pub/sub included."""
    pool = getattr(client, "connection_pool", None)  # none on a Redis Cluster client
    if hasattr(pool, "get_master_address"):
        try:
            before = pool.master_address
            if await pool.get_master_address() != before:  # connections in use too
                await pool.disconnect(inuse_connections=True)
        except Exception:  # no master known right now: the next call finds out
            pass


def _refresh(client):
    try:
        client.nodes_manager.initialize()
    except Exception:  # the cluster may be mid-failover: the next call tries again
        pass


def _async_node_client(client, key):
    """A plain asyncio client of the master that holds ``key``'s slot, kept on ``client``."""
    node = client.get_node_from_key(key)
    cache = client.__dict__.setdefault("worqr_node_clients", {})
    if node.name not in cache:
        kwargs = {k: v for k, v in node.connection_kwargs.items() if k not in ("host", "port")}
        pool = redis.asyncio.ConnectionPool(
            connection_class=node.connection_class, host=node.host, port=node.port, **kwargs
        )
        cache[node.name] = redis.asyncio.Redis(connection_pool=pool)
    return cache[node.name]


async def _arun_waiting(client, script, queue, argv, want, durable):
    if is_cluster(client):
        await client.initialize()  # a new cluster client knows no slot before its first command
    for attempt in range(4):
        target = _async_node_client(client, argv[0]) if is_cluster(client) else client
        p = target.pipeline(transaction=False)
        p.evalsha(script.sha, script.numkeys, *argv)
        p.execute_command("WAIT", *want)
        try:
            reply, acked = await p.execute(raise_on_error=False)
        except NETWORK_ERRORS:
            if is_cluster(client):
                await _arefresh(client)
            raise
        if isinstance(reply, Exception):
            if is_noscript(reply):
                await target.script_load(script.source)
                continue
            if is_cluster(client) and _is_moved(reply) and attempt < 3:
                await _arefresh(client)
                continue
            raise reply
        if int(acked) < want[0]:
            await arecheck_master(target)
        return _replicated(script.name, queue, reply, acked, want, durable)
    raise RuntimeError(f"{script.name}: could not run it on the master of queue {queue}")


async def _arefresh(client):
    try:
        await client.nodes_manager.initialize()
    except Exception:  # the cluster may be mid-failover: the next call tries again
        pass


def run_pipelined(client, calls):
    """Run several scripts in one round trip: ``calls`` is [(name, queue, args)]; returns the
    replies in order (scripts missing from the server's cache are loaded, then all re-run). On a
    Redis Cluster, one pipeline per master, each holding the calls of the queues it serves."""
    if is_cluster(client):
        return _run_pipelined_cluster(client, calls)
    return _pipelined(client, calls)


def _pipelined(client, calls):
    for attempt in (1, 2):
        p = client.pipeline(transaction=False)
        for name, queue, args in calls:
            script = get(name)
            p.evalsha(script.sha, script.numkeys, *_keys_and_head(name, queue), *args)
        replies = p.execute(raise_on_error=False)
        missing = {name for (name, _, _), r in zip(calls, replies) if isinstance(r, Exception) and is_noscript(r)}
        if not missing or attempt == 2:
            for r in replies:
                if isinstance(r, Exception):
                    raise r
            return replies
        for name in missing:
            client.script_load(get(name).source)


def _run_pipelined_cluster(client, calls):
    """The cluster client refuses scripts in its pipelines: group the calls by the master of
    their queue's slot and pipeline each group on that node's own client. A group whose slots
    moved meanwhile (MOVED: a failover) is run call by call through the cluster client, which
    follows redirections."""
    by_node = {}
    for i, (name, queue, _) in enumerate(calls):
        node = client.get_node_from_key(_keys_and_head(name, queue)[0])
        by_node.setdefault(node.name, (node, []))[1].append(i)
    replies = [None] * len(calls)
    for node, indexes in by_node.values():
        group = [calls[i] for i in indexes]
        try:
            got = _pipelined(client.get_redis_connection(node), group)
        except ResponseError as exc:
            if not _is_moved(exc):
                raise
            _refresh(client)
            got = [run(client, name, queue, *args) for name, queue, args in group]
        for i, reply in zip(indexes, got):
            replies[i] = reply
    return replies
