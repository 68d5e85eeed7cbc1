"""What the pages cost with many queues (issue 32): the overview, ``/metrics``, ``/api/queues`` and
a search for a word that matches nothing, at N queues of one pending task each.

Run with the project's interpreter:  .venv/bin/python bench/many_queues.py [--queues 30000]
[--name-length 20] [--runs 5]

Starts its own redis-server on a free port and a SQLite database in a temporary directory, then
times each request through Django's test client (in-process: the view, its Redis calls and its
rendering; no HTTP server), best and median of ``--runs``, with the answer's size and the Redis
commands it cost (``INFO stats`` ``total_commands_processed`` before and after, less the INFO
call itself; a script's own commands count too). Before measuring, one pass of the workers'
sweep (``engine/sweep.py``) sums the queues, as a running worker would have. Prints the load
average at the start and the end: the 2-core machine is shared.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(PROJECT)]


def fill(client, n, name_length):
    """N queues of one pending task each, made the way an enqueue makes them, 1,000 per round trip."""
    from queues.engine import commands, keys

    names = [f"q{i:06d}".ljust(name_length, "x") for i in range(n)]
    for start in range(0, n, 1000):
        chunk = names[start : start + 1000]
        calls = [commands.enqueue(q, [(f"{q}-{0:016x}", b"payload", "", "")]) for q in chunk]
        commands.run_pipelined(client, calls)
        client.sadd(keys.KNOWN_QUEUES, *chunk)
    return names


def has_sweep():
    """Whether this checkout has the workers' sweep (the overview's totals above 500 queues)."""
    import importlib.util

    return importlib.util.find_spec("queues.engine.sweep") is not None


def commands_processed(client):
    return int(client.info("stats")["total_commands_processed"])


def measure(label, request, client, runs):
    times, size, cost = [], 0, 0
    for _ in range(runs):
        before = commands_processed(client)
        t0 = time.perf_counter()
        response = request()
        times.append(time.perf_counter() - t0)
        cost = commands_processed(client) - before - 1
        body = b"".join(response.streaming_content) if response.streaming else response.content
        size = len(body)
        assert response.status_code == 200, (label, response.status_code, body[:300])
    print(
        f"{label:<34} best {min(times) * 1000:8.0f} ms   median {statistics.median(times) * 1000:8.0f} ms   "
        f"{size / 1e6:7.2f} MB   {cost:7d} Redis commands",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--queues", type=int, default=30000)
    parser.add_argument("--name-length", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="worqr-many-queues-")
    from queues.testing import RedisServer

    server = RedisServer(directory=workdir).start()
    os.environ.update(
        WORQR_REDIS_URL=server.url,
        WORQR_VAR_DIR=workdir,
        DJANGO_SETTINGS_MODULE="worqr_site.settings",
        DJANGO_ALLOWED_HOSTS="testserver",
    )
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        settings.WORQR["MAX_QUEUES"] = max(args.queues, 10000)
        call_command("migrate", verbosity=0)
        from queues.conf import get_connection
        from queues.models import ApiToken

        client = get_connection().client
        print(f"load average at start: {os.getloadavg()}", flush=True)
        t0 = time.perf_counter()
        fill(client, args.queues, args.name_length)
        print(f"{args.queues} queues ({args.name_length}-character names) made in {time.perf_counter() - t0:.1f} s")
        if has_sweep():
            from queues.engine.sweep import Sweep

            sweep, t0 = Sweep("bench", get_connection().config), time.perf_counter()
            while sweep.step(client) and sweep.names is not None:
                pass
            print(
                f"a sweep's pass over them (what a worker does, 1,000 queues a beat): {time.perf_counter() - t0:.1f} s"
            )
        user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench")
        _, raw = ApiToken.create("bench", None)
        from django.contrib.auth.models import Permission

        token = ApiToken.objects.get(name="bench")
        token.permissions.set(Permission.objects.filter(content_type__app_label="queues"))
        browser = Client()
        browser.force_login(user)
        api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
        measure("overview /queues/", lambda: browser.get("/queues/"), client, args.runs)
        measure("/metrics", lambda: api.get("/metrics"), client, args.runs)
        measure("/api/queues", lambda: api.get("/api/queues"), client, args.runs)
        measure("search 'nomatch' (one request)", lambda: browser.get("/queues/search/?q=nomatch"), client, 1)
        print(f"load average at end: {os.getloadavg()}", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
