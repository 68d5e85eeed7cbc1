import json

from django.core.management.base import BaseCommand, CommandError

from queues.conf import get_connection
from queues.engine import readmodel
from queues.engine.connection import NETWORK_ERRORS


class Command(BaseCommand):
    help = "Show counts per queue and the live workers (exit status 1 when Redis can't be reached)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args, **options):
        client = get_connection().client
        try:
            queues, workers = readmodel.overview(client), readmodel.workers(client)
            for name in readmodel.limited_queues(client, [q["name"] for q in queues]):
                next(q for q in queues if q["name"] == name)["limits"] = readmodel.limits(client, name, busiest=3)
        except NETWORK_ERRORS as exc:  # a health check's answer: a clear message and exit status 1
            raise CommandError(f"Redis can't be reached: {exc}") from exc
        if options["json"]:
            self.stdout.write(json.dumps({"queues": queues, "workers": workers}, indent=2, default=str))
            return
        cols = ("pending", "delayed", "active", "failed", "completed")
        self.stdout.write(f"{'queue':<30}" + "".join(f"{c:>11}" for c in cols) + "  paused")
        for q in queues:
            self.stdout.write(
                f"{q['name']:<30}" + "".join(f"{q[c]:>11}" for c in cols) + f"  {'yes' if q['paused'] else ''}"
            )
        for q in queues:
            if "limits" in q:
                self.stdout.write(f"  {q['name']}: {_limits_line(q['limits'])}")
        self.stdout.write(f"\n{len(workers)} worker(s)")
        for w in workers:
            self.stdout.write(
                f"  {w['name']}  queues={','.join(w['queues'])}  concurrency={w['concurrency']}"
                f"  active={w['active']}  processed={w['processed']}  heartbeat={w['heartbeat_age']:.1f}s ago"
            )


def _limits_line(lim):
    """One line of a queue's limits and their use."""
    parts = []
    if lim["concurrency"] is not None:
        parts.append(f"concurrency {lim['active']}/{lim['concurrency']} active")
    if lim["rate"] is not None:
        parts.append(f"rate {lim['starts_in_window']}/{lim['rate'][0]} starts per {lim['rate'][1]:g} s")
    if lim["partition_concurrency"] is not None:
        parts.append(f"per partition {lim['partition_concurrency']} active")
    if lim["partition_rate"] is not None:
        parts.append(f"per partition {lim['partition_rate'][0]} per {lim['partition_rate'][1]:g} s")
    parts.append(f"held back {lim['held_back']}")
    return ", ".join(parts)
