"""Loads the Lua scripts in ``lua/`` and runs them by EVALSHA, falling back to SCRIPT LOAD.

Each script is ``lua/<name>-<number of keys>.lua``; the shared helpers in ``lua/includes/`` are
inlined in front of every script, in file-name order. Every script takes the queue's keys in
``keys.QUEUE_KINDS`` order (hence the ``-15``), then ARGV[1] = the queue's key prefix and
ARGV[2] = the queue name. Placeholders ``@@NAME@@`` are filled from ``keys`` here, so key and
channel names are still built in one module.
"""

import hashlib
from functools import cache, lru_cache
from pathlib import Path

from redis.exceptions import NoScriptError, ResponseError

from . import keys

LUA_DIR = Path(__file__).with_name("lua")
_PLACEHOLDERS = {"@@CONTROL_PREFIX@@": keys.worker_channel("")}


class Script:
    """One Lua script: its source, SHA1 and key count."""

    def __init__(self, name, numkeys, source):
        self.name, self.numkeys, self.source = name, numkeys, source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __repr__(self):
        return f"<Script {self.name}-{self.numkeys}>"


@cache
def load_all():
    """{name: Script} for every script file, read once per process."""
    prelude = "\n".join(p.read_text() for p in sorted((LUA_DIR / "includes").glob("*.lua")))
    for placeholder, value in _PLACEHOLDERS.items():
        prelude = prelude.replace(placeholder, value)
    scripts = {}
    for path in sorted(LUA_DIR.glob("*.lua")):
        name, _, numkeys = path.stem.rpartition("-")
        if not numkeys.isdigit():
            raise RuntimeError(f"{path.name}: Lua script names end in -<number of keys>")
        if int(numkeys) != len(keys.QUEUE_KINDS):
            raise RuntimeError(f"{path.name}: expected {len(keys.QUEUE_KINDS)} keys")
        scripts[name] = Script(name, int(numkeys), prelude + "\n" + path.read_text())
    return scripts


@lru_cache(maxsize=4096)
def queue_args(queue):
    """The KEYS and the two leading ARGV every script of ``queue`` takes."""
    return tuple(keys.queue_key(queue, kind) for kind in keys.QUEUE_KINDS) + (
        keys.queue_prefix(queue),
        queue,
    )


def _is_noscript(exc):
    return isinstance(exc, NoScriptError) or (
        isinstance(exc, ResponseError) and str(exc).startswith("NOSCRIPT")
    )


def run(client, name, queue, *args):
    """Run script ``name`` for ``queue`` on a synchronous client."""
    script = load_all()[name]
    argv = queue_args(queue) + args
    try:
        return client.evalsha(script.sha, script.numkeys, *argv)
    except ResponseError as exc:
        if not _is_noscript(exc):
            raise
        client.script_load(script.source)
        return client.evalsha(script.sha, script.numkeys, *argv)


async def arun(client, name, queue, *args):
    """Run script ``name`` for ``queue`` on an asyncio client."""
    script = load_all()[name]
    argv = queue_args(queue) + args
    try:
        return await client.evalsha(script.sha, script.numkeys, *argv)
    except ResponseError as exc:
        if not _is_noscript(exc):
            raise
        await client.script_load(script.source)
        return await client.evalsha(script.sha, script.numkeys, *argv)


def pipe(pipeline, name, queue, *args):
    """Queue script ``name`` on a pipeline (the caller loads scripts first with ``ensure``)."""
    script = load_all()[name]
    pipeline.evalsha(script.sha, script.numkeys, *(queue_args(queue) + args))


def ensure(client):
    """Load every script into the server (after a restart the cache is empty)."""
    for script in load_all().values():
        client.script_load(script.source)
