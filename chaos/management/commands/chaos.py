"""``manage.py chaos``: the chaos soak (``chaos.run``), a command of this project's own ``chaos``
app, not of the worqr package. Starts its own Redis (with AOF), a
TCP proxy, workers and producers, injects faults, prints its figures and writes them as JSON;
exits 1 when a guarantee failed (a task lost with appendfsync always, a task run that was never
committed, more duplicates at a fault than tasks in flight)."""

import argparse

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from chaos.producer import produce
from chaos.run import FAULTS, Chaos, summary, write_json
from queues.conf import get_connection, var_dir


def _positive(kind):
    def parse(value):
        try:
            number = kind(value)
        except ValueError:
            number = 0
        if number <= 0:
            raise argparse.ArgumentTypeError(f"must be a number > 0, not {value!r}")
        return number

    return parse


def _faults(value):
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    bad = [k for k in kinds if k not in FAULTS]
    if not kinds or bad:
        raise argparse.ArgumentTypeError(f"faults are a comma-separated list of {', '.join(FAULTS)}")
    return kinds


def _gap(value):
    try:
        low, _, high = value.partition(",")
        low, high = float(low), float(high or low)
    except ValueError:
        low = high = -1
    if not 0 < low <= high:
        raise argparse.ArgumentTypeError(f"--gap is MIN,MAX seconds (0 < MIN <= MAX), not {value!r}")
    return low, high


class Command(BaseCommand):
    help = "Chaos soak: drain N tasks over K workers while killing, stopping and cutting things."

    def add_arguments(self, parser):
        parser.add_argument("--tasks", type=_positive(int), default=20000, help="tasks to commit (default 20000)")
        parser.add_argument("--workers", type=_positive(int), default=4, help="worker processes (default 4)")
        parser.add_argument("--concurrency", type=_positive(int), default=4, help="tasks per worker (default 4)")
        parser.add_argument("--producers", type=_positive(int), default=2, help="producer processes (default 2)")
        parser.add_argument("--batch", type=_positive(int), default=50, help="tasks per transaction (default 50)")
        parser.add_argument("--sleep-ms", type=int, default=10, help="each task sleeps 0 to this many ms (default 10)")
        parser.add_argument("--rate", type=_positive(float), help="tasks committed per second at most (all producers)")
        parser.add_argument(
            "--appendfsync", choices=["always", "everysec"], default="always", help="Redis AOF fsync (default always)"
        )
        parser.add_argument(
            "--faults", type=_faults, default=list(FAULTS), help=f"kinds to inject (default {','.join(FAULTS)})"
        )
        parser.add_argument("--gap", type=_gap, default=(0.5, 2.0), help="seconds between faults, MIN,MAX (0.5,2)")
        parser.add_argument("--min-faults", type=int, default=0, help="inject at least this many faults")
        parser.add_argument("--drain-timeout", type=_positive(float), default=120.0, help="seconds (default 120)")
        parser.add_argument("--seed", type=int, help="seed of the fault schedule")
        parser.add_argument("--json", help="where to write the figures (default var/chaos.json)")
        parser.add_argument("--dir", help="keep the run's files (logs, AOF) in this directory")
        parser.add_argument("--database", default="default", help="database alias (default: default)")
        parser.add_argument("--produce", action="store_true", help=argparse.SUPPRESS)  # a producer process

    def handle(self, *args, **o):
        if o["database"] not in connections:
            raise CommandError(f"--database: no database {o['database']!r} in DATABASES")
        if o["sleep_ms"] < 0:
            raise CommandError("--sleep-ms must not be negative")
        if o["produce"]:
            raise SystemExit(produce(o["tasks"], o["batch"], o["sleep_ms"], o["database"], o["rate"]))
        chaos = Chaos(
            tasks=o["tasks"],
            workers=o["workers"],
            concurrency=o["concurrency"],
            producers=o["producers"],
            batch=o["batch"],
            sleep_ms=o["sleep_ms"],
            rate=o["rate"],
            appendfsync=o["appendfsync"],
            faults=o["faults"],
            gap=o["gap"],
            min_faults=o["min_faults"],
            drain_timeout=o["drain_timeout"],
            heartbeat_ttl=get_connection().config.heartbeat_ttl,
            database=o["database"],
            seed=o["seed"],
            directory=o["dir"],
            out=lambda line: self.stdout.write(line),
        )
        figures = chaos.run()
        path = o["json"] or str(var_dir() / "chaos.json")
        write_json(figures, path)
        self.stdout.write(summary(figures))
        self.stdout.write(f"figures written to {path}")
        if not figures["ok"]:
            raise SystemExit(1)
