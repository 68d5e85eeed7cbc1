from django.core.management.base import BaseCommand, CommandError

from queues.conf import get_connection
from queues.engine import crypto, keys, rotation
from queues.engine.errors import InvalidQueueName


class Command(BaseCommand):
    help = "Encrypted payloads: make a key, or re-seal a queue's payloads with the newest key."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("key", help="print a new key for WORQR['ENCRYPTION_KEYS']")
        rotate = sub.add_parser("rotate", help="re-seal the queue's tasks (not running) with the first key")
        rotate.add_argument("queue")

    def handle(self, *args, **o):
        if o["action"] == "key":
            self.stdout.write(crypto.new_key())
            return
        connection = get_connection()
        try:
            queue = keys.check_queue_name(o["queue"])
        except InvalidQueueName as exc:
            raise CommandError(str(exc)) from None
        if not crypto.encrypts(connection.config, queue):
            raise CommandError(f"queue {queue!r} is not in WORQR['ENCRYPTED_QUEUES']")
        done = rotation.rotate(connection.client, connection.config, queue)
        self.stdout.write(
            f"queue {queue}: {done.looked} tasks looked at, {done.resealed} sealed anew, {done.current} already "
            f"with the newest key, {done.unreadable} opened by no key, in {done.calls} calls"
        )
        if done.unreadable:
            raise CommandError(f"{done.unreadable} payloads open with no key of WORQR['ENCRYPTION_KEYS']")
