from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError

from queues.models import ACTION_PERMISSIONS, ApiToken


class Command(BaseCommand):
    help = "Create, revoke and list HTTP API tokens. A new token is printed once and stored hashed."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a token and print it")
        create.add_argument("name")
        create.add_argument(
            "--perm",
            action="append",
            default=[],
            metavar="CODENAME",
            help=f"a permission to give (repeat); one of {', '.join(ACTION_PERMISSIONS)}, or 'all'",
        )
        sub.add_parser("revoke", help="revoke a token, for good").add_argument("name")
        sub.add_parser("list", help="list tokens (never their keys)")

    def handle(self, *args, **o):
        getattr(self, f"_{o['action']}")(o)

    def _create(self, o):
        codenames = list(ACTION_PERMISSIONS) if "all" in o["perm"] else o["perm"]
        unknown = sorted(set(codenames) - set(ACTION_PERMISSIONS))
        if unknown:
            raise CommandError(f"unknown permission(s) {', '.join(unknown)}; known: {', '.join(ACTION_PERMISSIONS)}")
        if ApiToken.objects.filter(name=o["name"]).exists():
            raise CommandError(f"a token named {o['name']!r} exists already")
        perms = Permission.objects.filter(content_type__app_label="queues", codename__in=codenames)
        if len(perms) != len(set(codenames)):
            raise CommandError("the permissions are missing from the database: run 'manage.py migrate'")
        _, raw = ApiToken.create(o["name"], perms)
        if not codenames:
            self.stderr.write("warning: the token has no permission; every call will answer 403")
        self.stdout.write(raw)

    def _revoke(self, o):
        tokens = ApiToken.objects.filter(name=o["name"])
        if not tokens.exists():
            raise CommandError(f"no token named {o['name']!r}")
        ApiToken.revoke(tokens)
        self.stdout.write(f"revoked {o['name']}")

    def _list(self, o):
        for t in ApiToken.objects.prefetch_related("permissions"):
            perms = ",".join(sorted(p.codename for p in t.permissions.all())) or "-"
            used = f"{t.last_used:%Y-%m-%d %H:%M}" if t.last_used else "never"
            self.stdout.write(
                f"{t.name}\t{t.prefix}…\t{'revoked' if t.revoked else 'active'}\tlast used {used}\t{perms}"
            )
