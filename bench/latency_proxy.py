"""A TCP proxy that holds back what it forwards by a fixed delay: Redis latency for the benchmarks.

    python bench/latency_proxy.py --listen 6392 --upstream 127.0.0.1:6391 [--delay-ms 1]
                                  [--direction down|up|both] [--stats FILE]

Sidekiq's own benchmark (``bin/sidekiqload`` with ``LATENCY=1``) puts Toxiproxy between Sidekiq
and Redis and adds its ``latency`` toxic, 1 ms, on the ``downstream`` stream (Redis to the
client). Toxiproxy stamps every chunk it reads from a socket and writes it on once the delay has
passed since that stamp; chunks keep their order, and a burst of them is not held back one after
another (each waits from its own arrival). This proxy does the same: every chunk read from one side
is stamped (``loop.time()``), queued, and written to the other side at stamp + delay, in order;
chunks that are due together go out in one write. With the default (``--direction down``, 1 ms)
each request-reply round trip gains 1 ms, as in Sidekiq's run, and a pipeline of N commands gains
1 ms, not N. ``--direction both`` delays both ways (a round trip then gains twice the delay);
``--delay-ms 0`` forwards at once, for a control run that pays the proxy's own cost alone.

The event loop waits in ``select()`` (microsecond timeouts) rather than ``epoll``, whose
millisecond timeouts would round each 1 ms wait up towards 2 ms, with the thread's timer slack
at 1 ns (Linux's default of 50 us would add that much to each wait). On SIGTERM or SIGINT it writes
to ``--stats`` (JSON) what it forwarded and the delay it actually added (p50/p99/max per
direction, from a histogram of 10 us buckets) with its own CPU time, then exits. It is the
benchmark's tool, not a production proxy: no TLS, one process, IPv4 loopback by default.
"""

import argparse
import asyncio
import collections
import ctypes
import json
import resource
import selectors
import signal
import socket
import sys

#: Histogram bucket of the measured added delay, in seconds.
BUCKET = 10e-6
#: What "due together" means: chunks due within this of the first are written with it.
SLACK = 20e-6


class Direction:
    """One way through the proxy, shared by every connection: its delay and what it added."""

    def __init__(self, name, delay):
        self.name, self.delay = name, delay
        self.chunks = self.bytes = 0
        self.histogram = collections.Counter()

    def record(self, added, size):
        self.chunks += 1
        self.bytes += size
        self.histogram[int(added / BUCKET)] += 1

    def summary(self):
        out = {"delay_ms": self.delay * 1000, "chunks": self.chunks, "bytes": self.bytes}
        if self.chunks:
            total, seen, marks = self.chunks, 0, {"p50": 0.5, "p99": 0.99}
            for bucket in sorted(self.histogram):
                seen += self.histogram[bucket]
                for name, q in list(marks.items()):
                    if seen >= q * total:
                        out[f"added_{name}_ms"] = bucket * BUCKET * 1000
                        del marks[name]
            out["added_max_ms"] = max(self.histogram) * BUCKET * 1000
        return out


class Delays:
    """Every delayed chunk of the proxy, of every connection, in one queue: the delay is the same
    for all, so arrival order is due order, and one timer serves them all (a timer per connection
    costs more CPU, which the benchmarked processes share)."""

    def __init__(self, loop, delay):
        self.loop, self.delay = loop, delay
        self.queue = collections.deque()  # (due, read at, pipe, data)
        self.timer = None

    def add(self, pipe, data):
        now = self.loop.time()
        self.queue.append((now + self.delay, now, pipe, data))
        pipe.queued += 1
        if self.timer is None:
            self.timer = self.loop.call_at(now + self.delay, self.flush)

    def flush(self):
        self.timer = None
        now = self.loop.time()
        due = {}
        while self.queue and self.queue[0][0] <= now + SLACK:
            _, read_at, pipe, data = self.queue.popleft()
            pipe.direction.record(now - read_at, len(data))
            due.setdefault(pipe, []).append(data)
        for pipe, chunks in due.items():
            pipe.queued -= len(chunks)
            pipe.write(b"".join(chunks))
        if self.queue:
            self.timer = self.loop.call_at(self.queue[0][0], self.flush)


class Pipe:
    """One connection's chunks going one way: written at once, or through ``delays``."""

    def __init__(self, direction, destination, delays):
        self.direction, self.destination = direction, destination
        self.delays = delays if direction.delay else None
        self.queued = 0
        self.closing = False

    def feed(self, data):
        if self.delays is None:
            self.write(data)
            self.direction.record(0.0, len(data))
        else:
            self.delays.add(self, data)

    def write(self, data):
        if not self.destination.is_closing():
            self.destination.write(data)
        if self.closing and not self.queued:
            self.destination.close()

    def close_after_flush(self):
        """The source closed: close the destination once what is queued has gone out."""
        self.closing = True
        if not self.queued:
            self.destination.close()


class Side(asyncio.Protocol):
    """One socket of a proxied connection; what it reads goes to its pipe towards the other side."""

    def __init__(self, on_made=None):
        self.on_made = on_made
        self.transport = self.pipe = self.other = None
        self.pending = []  # read before the other side was connected

    def connection_made(self, transport):
        self.transport = transport
        if self.on_made is not None:
            self.on_made(self)

    def data_received(self, data):
        if self.pipe is None:
            self.pending.append(data)
        else:
            self.pipe.feed(data)

    def eof_received(self):
        return False  # the transport closes; connection_lost passes it on

    def connection_lost(self, exc):
        if self.pipe is not None:
            self.pipe.close_after_flush()
        elif self.other is not None and self.other.transport is not None:
            self.other.transport.close()

    # Flow control: when the other side's buffer is full, stop reading this one.
    def pause_writing(self):
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self):
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()


class Proxy:
    """Listens on ``listen``; each accepted connection gets one to ``upstream``."""

    def __init__(self, loop, upstream, down, up):
        self.loop, self.upstream = loop, upstream
        self.down, self.up = down, up  # down: upstream to client; up: client to upstream
        self.delays = Delays(loop, max(down.delay, up.delay))
        self.connections = 0
        self.tasks = set()  # the connects under way (the loop keeps only weak references)

    def client_protocol(self):
        return Side(on_made=self.accepted)

    def accepted(self, client):
        client.transport.pause_reading()  # until the upstream connection is there
        task = self.loop.create_task(self.connect(client))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def connect(self, client):
        host, port = self.upstream
        try:
            _, server = await self.loop.create_connection(Side, host, port)
        except OSError as exc:
            print(f"latency_proxy: upstream {host}:{port}: {exc}", file=sys.stderr)
            client.transport.close()
            return
        if client.transport.is_closing():
            server.transport.close()
            return
        self.connections += 1
        client.other, server.other = server, client
        client.pipe = Pipe(self.up, server.transport, self.delays)
        server.pipe = Pipe(self.down, client.transport, self.delays)
        for data in client.pending:
            client.pipe.feed(data)
        client.pending = []
        client.transport.resume_reading()


def fine_timers():
    """Linux: wake from select() within ~1 us of the timeout instead of the default 50 us slack
    (prctl PR_SET_TIMERSLACK); elsewhere, or if refused, the default stays."""
    try:
        ctypes.CDLL(None).prctl(29, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def parse_hostport(text, default_host="127.0.0.1"):
    host, _, port = text.rpartition(":")
    return host or default_host, int(port)


def argv(python, listen, upstream, delay_ms, direction="down", stats=None):
    """The command line that runs this proxy (for the harnesses that start it as a process)."""
    out = [python, __file__, "--listen", str(listen), "--upstream", upstream, "--delay-ms", str(delay_ms)]
    out += ["--direction", direction] + (["--stats", str(stats)] if stats else [])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", required=True, help="[host:]port to listen on (host 127.0.0.1 by default)")
    ap.add_argument("--upstream", required=True, help="host:port to forward to")
    ap.add_argument("--delay-ms", type=float, default=1.0, help="added delay per chunk, in ms (default 1)")
    ap.add_argument(
        "--direction",
        choices=("down", "up", "both"),
        default="down",
        help="down: replies (Redis to client), as Sidekiq's run; up: requests; both (default down)",
    )
    ap.add_argument("--stats", help="write what was forwarded and the delay added here (JSON) on exit")
    a = ap.parse_args()
    if a.delay_ms < 0:
        ap.error("--delay-ms must be >= 0")
    delay = a.delay_ms / 1000
    down = Direction("down", delay if a.direction in ("down", "both") else 0.0)
    up = Direction("up", delay if a.direction in ("up", "both") else 0.0)

    fine_timers()
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    asyncio.set_event_loop(loop)
    proxy = Proxy(loop, parse_hostport(a.upstream), down, up)
    host, port = parse_hostport(a.listen)
    server = loop.run_until_complete(
        loop.create_server(proxy.client_protocol, host, port, family=socket.AF_INET, reuse_address=True)
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"latency_proxy: {host}:{port} -> {a.upstream}, {a.delay_ms:g} ms {a.direction}", file=sys.stderr, flush=True)
    try:
        loop.run_until_complete(stop.wait())
    finally:
        server.close()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        if a.stats:
            summary = {
                "connections": proxy.connections,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "down": down.summary(),
                "up": up.summary(),
            }
            with open(a.stats, "w") as f:
                json.dump(summary, f)
        loop.close()


if __name__ == "__main__":
    main()
