"""The few things worqr keeps in the database: the audit log of dashboard/API actions (whose
Meta also carries the action permissions) and the HTTP API's tokens. Tasks live in Redis."""

import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import Permission
from django.db import models
from django.db.models import Value
from django.db.models.functions import Cast, Concat

#: codename -> description of every action permission (dashboard and API alike).
ACTION_PERMISSIONS = {
    "view_dashboard": "Can view the queues dashboard",
    "enqueue_task": "Can enqueue tasks",
    "cancel_task": "Can cancel tasks",
    "retry_task": "Can retry failed tasks",
    "delete_task": "Can delete tasks",
    "retry_all_failed": "Can retry all failed tasks of a queue",
    "pause_queue": "Can pause and resume queues",
    "purge_queue": "Can purge a queue's pending tasks",
    "manage_schedules": "Can pause, resume and trigger schedules",
    "manage_limits": "Can change and reset queues' limits",
    "view_encrypted_payload": "Can see the payloads of encrypted queues",
    "change_schedule": "Can create, change and delete schedules made at run time",
    "control_workers": "Can tell workers to go quiet or to stop",
}


class AuditLog(models.Model):
    """Who did what to which task or queue, and when."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    token = models.ForeignKey("ApiToken", null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=40)
    queue = models.CharField(max_length=200, blank=True)
    task_id = models.CharField(max_length=220, blank=True)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["-at"]
        default_permissions = ("view",)
        permissions = list(ACTION_PERMISSIONS.items())

    def __str__(self):
        who = self.user or self.token or "?"
        return f"{self.at:%Y-%m-%d %H:%M:%S} {who} {self.action} {self.queue} {self.task_id}".strip()


def hash_token(raw):
    return hashlib.sha256(raw.encode()).hexdigest()


#: What a revoked token keeps in place of its key's hash: never a SHA-256, so no key matches.
REVOKED_MARK = "revoked:"


class ApiToken(models.Model):
    """A bearer token for the HTTP API. Only its SHA-256 is stored; it carries permissions.

    Revocation is final: a revoked token's hash is replaced by ``REVOKED_MARK`` and a random
    value, so no key matches it again whatever its ``revoked`` field says later, and saving a
    revoked token as not revoked raises ``ValueError`` (whoever could edit tokens could
    otherwise revive one holding more rights than they do). Replace a revoked token with a new
    one.
    """

    name = models.CharField(max_length=100, unique=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=8, editable=False, help_text="First characters, to tell tokens apart")
    permissions = models.ManyToManyField(Permission, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.BooleanField(default=False)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def create(cls, name, permissions=None):
        """Create a token; returns (token, raw key). The raw key is shown once, never stored."""
        token = cls(name=name)
        raw = token.new_key()
        token.save()
        if permissions is not None:
            token.permissions.set(permissions)
        return token, raw

    def save(self, *args, **kwargs):
        if self.pk is not None and not self.revoked and ApiToken.objects.filter(pk=self.pk, revoked=True).exists():
            raise ValueError(f"API token {self.name!r} is revoked, and revocation is final: make a new token")
        if self.revoked and not self.key_hash.startswith(REVOKED_MARK):
            self.key_hash = REVOKED_MARK + secrets.token_hex(16)  # the old key never matches again
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "key_hash"}
        super().save(*args, **kwargs)

    @classmethod
    def revoke(cls, tokens):
        """Revoke ``tokens`` (a queryset) for good, in one statement; returns how many were
        still live."""
        mark = Concat(Value(REVOKED_MARK), Cast("pk", output_field=models.CharField()))
        return tokens.filter(revoked=False).update(revoked=True, key_hash=mark)

    def new_key(self):
        """Give the (unsaved) token a new key; returns the raw key, of which only the hash is kept."""
        raw = "wq_" + secrets.token_urlsafe(32)
        self.key_hash, self.prefix = hash_token(raw), raw[:8]
        return raw


class OutboxTask(models.Model):
    """A task enqueued inside a database transaction (``on_commit=True``) or with
    ``durable=True``, written in the caller's transaction: pushed to Redis right after the commit
    and then deleted; a row left behind (the process died, Redis was down) is pushed by the
    workers' relay (``queues.outbox``). Pushing is idempotent by ``task_id``."""

    seq = models.BigAutoField(primary_key=True)
    task_id = models.CharField(max_length=220, unique=True)
    queue = models.CharField(max_length=200)
    payload = models.BinaryField()
    #: The rest of the enqueue, JSON: when ('' or '@<ms>'), options, unique key, payload kind.
    spec = models.TextField()
    created = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["seq"]
        default_permissions = ("view",)

    def __str__(self):
        return f"{self.task_id} (outbox)"
