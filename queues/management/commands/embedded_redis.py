from django.core.management.base import BaseCommand

from queues import embedded
from queues.conf import var_dir


class Command(BaseCommand):
    help = "Start or stop the embedded Redis (used when WORQR_REDIS_URL is not set), or say if it runs."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "stop", "status"])

    def handle(self, *args, **options):
        if options["action"] == "status":
            self.stdout.write("running" if embedded.running(var_dir()) else "not running")
        elif options["action"] == "start":
            self.stdout.write(embedded.ensure(var_dir()))
        else:
            self.stdout.write("stopped" if embedded.stop(var_dir()) else "was not running")
