"""``manage.py schedules [--json]`` lists the schedules; ``schedules trigger|pause|resume NAME``."""

import json

from django.core.management.base import BaseCommand, CommandError

from queues import schedules
from queues.engine.errors import ScheduleNotFound


def _when(dt):
    return dt.strftime("%Y-%m-%d %H:%M:%S") if dt else "-"


class Command(BaseCommand):
    help = "List the schedules (periodic tasks), or trigger, pause or resume one."

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", choices=["list", "trigger", "pause", "resume"], default="list")
        parser.add_argument("name", nargs="?", help="the schedule (for trigger, pause and resume)")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args, action, name, **options):
        if action == "list":
            if name:
                raise CommandError("list takes no name")
            return self.list(options["json"])
        if not name:
            raise CommandError(f"{action} needs the name of a schedule")
        try:
            result = getattr(schedules, action)(name)
        except ScheduleNotFound:
            raise CommandError(f"there is no schedule {name!r} (see: manage.py schedules)") from None
        if action == "trigger":
            self.stdout.write(result)
        else:
            done = "paused" if action == "pause" else "resumed"
            self.stdout.write(f"schedule {name} {done}" if result else f"schedule {name} was already {done}")

    def list(self, as_json):
        found = schedules.all()
        if as_json:
            self.stdout.write(json.dumps({"schedules": [s.as_dict() for s in found]}, indent=2))
            return
        self.stdout.write(f"{'schedule':<24}{'queue':<20}{'when':<22}{'next run (UTC)':<21}{'last run (UTC)':<21}state")
        for s in found:
            when = s.cron if s.cron else f"every {s.every:g} s"
            if s.cron and s.timezone != "UTC":
                when += f" {s.timezone}"
            state = "paused" if s.paused else ("disabled" if not s.enabled else "")
            self.stdout.write(
                f"{s.name:<24}{s.queue:<20}{when:<22}{_when(s.next_run):<21}{_when(s.last_run):<21}{state}"
            )
        self.stdout.write(f"\n{len(found)} schedule(s)")
