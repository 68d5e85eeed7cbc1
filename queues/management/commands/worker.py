"""``manage.py worker``: checks its options and hands off to the engine's Worker."""

import logging

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from queues.conf import LOG_FORMATS, get_connection, log_format, schedule_specs
from queues.engine.errors import WorqrError
from queues.engine.registry import all_handlers
from queues.engine.worker import Worker
from queues.engine.worker.logs import use_json
from queues.webhooks import worker_callback_handler


class Command(BaseCommand):
    help = "Run a worker: serves the queues in the order given (earlier = higher priority)."

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
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        if options["grace"] < 0:
            raise CommandError("--grace must not be negative")
        handlers = all_handlers()
        queues = options["queues"] or sorted(handlers)
        try:
            callbacks = worker_callback_handler()
            worker = Worker(
                queues,
                get_connection(),
                concurrency=options["concurrency"],
                name=options["name"],
                grace=options["grace"],
                callback_handler=callbacks,
                schedules=schedule_specs(),
            )
            if (options["log_format"] or log_format()) == "json":
                use_json(worker.name)
        except (WorqrError, ValueError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc
        for queue in queues:
            if queue not in handlers:  # allowed only because callbacks are on: a typo is served forever
                logging.getLogger("worqr.worker").warning(
                    "worqr: queue %s has no handler: this worker runs only callback tasks there (tasks with a "
                    "callback URL); its other tasks fail",
                    queue,
                )
        code = worker.run()
        if code:
            raise SystemExit(code)
