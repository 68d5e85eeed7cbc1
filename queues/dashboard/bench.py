"""Benchmark of the queue page with a deep queue: ``python -m queues.dashboard.bench [N]``.

Fills a throw-away queue with N pending tasks (default 1,000,000, in batches of 10,000), then
times the queue page's server time (the whole Django view: Redis reads and template) on its
first, middle and last page, and prints one line. The queue is dropped afterwards. Runs with
the project's settings (``DJANGO_SETTINGS_MODULE``, ``WORQR_REDIS_URL``); needs no database.
"""

import os
import statistics
import sys
import time


def measure(n=1_000_000, runs=15):
    from django.contrib.auth.models import User
    from django.test import RequestFactory

    from queues import Queue
    from queues.dashboard import queries
    from queues.dashboard.views.queue import queue as queue_view

    name = f"bench-dashboard-{os.getpid()}"
    q = Queue(name)
    try:
        started = time.perf_counter()
        for start in range(0, n, 10_000):
            q.enqueue_many([f'{{"n": {i}}}' for i in range(start, min(n, start + 10_000))])
        fill = time.perf_counter() - started
        user = User(username="bench", is_staff=True, is_superuser=True, is_active=True)
        factory = RequestFactory()
        results = {}
        last = queries.page_count(n)
        for label, page in (("first", 1), ("middle", last // 2), ("last", last)):
            times = []
            for _ in range(runs):
                request = factory.get(f"/queues/q/{name}/", {"page": page})
                request.user = user
                t0 = time.perf_counter()
                response = queue_view(request, name)
                times.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200, response.status_code
            results[label] = statistics.median(times)
        return {"n": n, "fill_s": fill, **results}
    finally:
        q.drop()


def main(argv):
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "worqr_site.settings")
    django.setup()
    n = int(argv[1]) if len(argv) > 1 else 1_000_000
    r = measure(n)
    print(
        f"dashboard queue page, {r['n']:,} pending: server time (median) first page {r['first']:.1f} ms, "
        f"middle {r['middle']:.1f} ms, last {r['last']:.1f} ms (fill {r['fill_s']:.0f} s)"
    )


if __name__ == "__main__":
    main(sys.argv)
