from django.core.management.base import BaseCommand, CommandError

from queues.conf import get_connection
from queues.engine import deploys
from queues.engine.errors import InvalidInput


class Command(BaseCommand):
    help = "Mark a deploy now: every chart of the dashboard draws a line with its label from then on."

    def add_arguments(self, parser):
        parser.add_argument("label", help="what was deployed (one line, at most 100 characters)")

    def handle(self, *args, **o):
        try:
            at = deploys.mark_deploy(get_connection().client, o["label"])
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"deploy {o['label'].strip()!r} marked at {at}")
