"""``manage.py worker``: checks its options and hands off to the engine's Worker (or, with
``--processes N``, to a Supervisor of N workers)."""

import argparse
import logging
import math
import os
import signal
import threading

import django
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from queues.conf import LOG_FORMATS, get_connection, log_format, schedule_specs
from queues.engine.errors import WorqrError
from queues.engine.registry import all_handlers
from queues.engine.worker import Worker
from queues.engine.worker.launcher import default_name
from queues.engine.worker.logs import use_json
from queues.engine.worker.supervisor import Supervisor
from queues.outbox import Relay
from queues.webhooks import worker_callback_handler

#: How many times ``child_init`` ran in this process: 1 in an isolated handler's process (Django
#: is set up once per process, not per task), 0 in a worker.
child_inits = 0


def child_init():
    """Runs once in each isolated handler's process, before its first task. The process is a
    fork of the worker, so Django is set up already (set up here otherwise), and it has no
    database connection of its parent's: they were closed before the fork."""
    global child_inits
    child_inits += 1
    if not apps.ready:
        django.setup()


def run_with_relay(worker):
    """Run a worker with the outbox relay beside it (``queues.outbox.Relay``): every worker
    pushes the tasks left in the outbox, so they reach Redis however many workers die."""
    relay = Relay()
    try:
        return worker.run(after_fork=relay.start)  # after the fork server: no thread of ours in it
    finally:
        # The worker has stopped (its loop, which handled stop signals, is closed): a stop signal
        # now, such as a supervisor passing a second one on, has nothing left to stop and must
        # not turn this clean exit into a death by signal (seen: "exited (signal 15)").
        if threading.current_thread() is threading.main_thread():  # the process's own worker
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)
        relay.stop()


#: The most worker processes ``--processes`` starts: a typo of a few more digits must not fork
#: until the machine runs out of processes (the supervisor handles stop signals once all started).
MAX_PROCESSES = 1024
#: The most slots ``--concurrency`` gives a worker (threads start as tasks need them; a worker with
#: isolated handlers forks one process per slot, at most ``procpool.MAX_PROCESSES``).
MAX_CONCURRENCY = 10_000


def _count(value, auto=False, most=None):
    if auto and value == "auto":
        return os.cpu_count() or 1
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1 or (most is not None and number > most):
        most_text = f", at most {most}" if most is not None else ""
        raise argparse.ArgumentTypeError(
            f"must be a whole number >= 1{' or auto' if auto else ''}{most_text}, not {value!r}"
        )
    return number


class Command(BaseCommand):
    help = "Run a worker: serves the queues in the order given (earlier = higher priority)."
    #: Only worqr's own checks: the others (URLs above all) would import the dashboard, the API,
    #: the admin and prometheus_client into every worker process (about 15 MiB).
    requires_system_checks = ["worqr"]

    def add_arguments(self, parser):
        parser.add_argument("queues", nargs="*", help="queues to serve (default: every queue with a handler)")
        parser.add_argument("--concurrency", "-c", type=int, default=1, help="tasks run at once (default 1)")
        parser.add_argument("--name", help="worker name (default: host.pid.random)")
        parser.add_argument(
            "--grace",
            type=float,
            default=30.0,
            help="seconds running tasks get to finish on SIGTERM/SIGINT (default 30)",
        )
        parser.add_argument(
            "--processes",
            type=lambda value: _count(value, auto=True, most=MAX_PROCESSES),
            help="run N worker processes (auto: one per CPU) under a supervisor, named NAME-1 ... NAME-N",
        )
        parser.add_argument(
            "--isolation",
            choices=["thread", "process"],
            default="thread",
            help="where sync handlers that don't choose run (default thread)",
        )
        parser.add_argument("--max-tasks-per-child", type=_count, help="replace a handler process after N tasks")
        parser.add_argument(
            "--max-memory",
            type=_count,
            metavar="MB",
            help="replace a handler process once its resident memory passes MB",
        )
        parser.add_argument(
            "--log-level",
            default="INFO",
            choices=["DEBUG", "INFO", "WARNING", "ERROR"],
            help="INFO logs one line per task; WARNING only problems",
        )
        parser.add_argument(
            "--log-format",
            choices=LOG_FORMATS,
            help="text, or json: one JSON object per line (default: WORQR['LOG_FORMAT'], else text)",
        )

    def handle(self, *args, **options):
        logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=options["log_level"])
        logging.getLogger("worqr").setLevel(options["log_level"])
        if not 1 <= options["concurrency"] <= MAX_CONCURRENCY:
            raise CommandError(f"--concurrency must be from 1 to {MAX_CONCURRENCY:,}, not {options['concurrency']}")
        if not math.isfinite(options["grace"]) or options["grace"] < 0:
            raise CommandError(f"--grace must be a number of seconds >= 0, not {options['grace']}")
        handlers = all_handlers()
        queues = options["queues"] or sorted(handlers)
        twice = sorted({q for q in queues if queues.count(q) > 1})
        if twice:
            raise CommandError(f"queue(s) given more than once: {', '.join(twice)}")
        json_logs = (options["log_format"] or log_format()) == "json"

        def make_worker(name):
            worker = Worker(
                queues,
                get_connection(),
                concurrency=options["concurrency"],
                name=name,
                grace=options["grace"],
                callback_handler=worker_callback_handler(),
                schedules=schedule_specs(),
                isolation=options["isolation"],
                max_tasks_per_child=options["max_tasks_per_child"],
                max_memory=options["max_memory"],
                child_init=child_init,
            )
            if json_logs:
                use_json(worker.name)
            return worker

        try:
            if options["processes"]:
                base = options["name"] or default_name()
                make_worker(f"{base}-1")  # bad input is reported here, before anything is forked
                runner = Supervisor(
                    options["processes"],
                    base,
                    lambda name: run_with_relay(make_worker(name)),
                    grace=options["grace"],
                    kill_grace=get_connection().config.kill_grace,
                )
                if json_logs:
                    use_json(base)
            else:
                runner = make_worker(options["name"])
        except (WorqrError, ValueError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc
        for queue in queues:
            if queue not in handlers:  # allowed only because callbacks are on: a typo is served forever
                logging.getLogger("worqr.worker").warning(
                    "worqr: queue %s has no handler: this worker runs only callback tasks there (tasks with a "
                    "callback URL); its other tasks fail",
                    queue,
                )
        connections.close_all()  # forked processes must not share this one's database connections
        code = runner.run() if options["processes"] else run_with_relay(runner)
        if code:
            raise SystemExit(code)
