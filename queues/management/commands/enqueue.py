import sys

from django.core.management.base import BaseCommand, CommandError

from queues.conf import get_connection
from queues.engine import Queue
from queues.engine.errors import WorqrError


class Command(BaseCommand):
    help = "Enqueue payloads on a queue and print one task id per line ('-' reads stdin, one per line)."

    def add_arguments(self, parser):
        parser.add_argument("queue")
        parser.add_argument("payloads", nargs="+", help="payloads; '-' reads one payload per line from stdin")
        parser.add_argument("--delay", type=float, help="seconds before the tasks may run")
        parser.add_argument("--retries", type=int, help="retries after a failed attempt")
        parser.add_argument("--timeout", type=float, help="seconds a run may take")
        parser.add_argument("--lock", help="lock key: tasks sharing it never run at once")
        parser.add_argument("--unique", action="store_true", help="skip payloads already pending or running")

    def handle(self, *args, **o):
        payloads = []
        for p in o["payloads"]:
            if p == "-":
                payloads += [line.rstrip("\n") for line in sys.stdin]
            else:
                payloads.append(p)
        try:
            q = Queue(o["queue"], get_connection())
            ids = q.enqueue_many(
                payloads,
                delay=o["delay"],
                retries=o["retries"],
                timeout=o["timeout"],
                lock=o["lock"],
                unique=o["unique"],
            )
        except WorqrError as exc:
            raise CommandError(str(exc)) from exc
        for task_id in ids:
            self.stdout.write(task_id)
