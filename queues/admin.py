"""Admin of worqr's models.

- AuditLog (the dashboard, issue 5): read-only; rows are written only by dashboard and API
  actions, so nobody can add, edit or forge them here.
- ApiToken: registered by the HTTP API (issue 6) below.
"""

import secrets

from django.contrib import admin, messages
from django.contrib.auth.models import Permission

from .models import ACTION_PERMISSIONS, ApiToken, AuditLog, hash_token


@admin.register(AuditLog)
class AuditLogAdmin(admin.ModelAdmin):
    list_display = ("at", "user", "token", "action", "queue", "task_id", "detail")
    list_filter = ("action", "queue")
    search_fields = ("queue", "task_id", "user__username", "detail")
    date_hierarchy = "at"
    list_select_related = ("user", "token")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# -- ApiToken (HTTP API, issue 6) ---------------------------------------------------------------


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created here or with ``manage.py api_token``; the key is shown once."""

    list_display = ("name", "prefix", "created", "last_used", "revoked")
    list_filter = ("revoked",)
    search_fields = ("name", "prefix")
    fields = ("name", "permissions", "revoked", "prefix", "created", "last_used")
    readonly_fields = ("prefix", "created", "last_used")
    filter_horizontal = ("permissions",)
    actions = ["revoke"]

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "permissions":  # only the actions the API checks
            kwargs["queryset"] = Permission.objects.filter(
                content_type__app_label="queues", codename__in=ACTION_PERMISSIONS
            )
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        raw = "wq_" + secrets.token_urlsafe(32)  # the format of ApiToken.create
        obj.key_hash, obj.prefix = hash_token(raw), raw[:8]
        super().save_model(request, obj, form, change)
        self.message_user(request, f"The token of {obj.name!r} is {raw} . Copy it now: it is stored hashed "
                                   "and will not be shown again.", messages.WARNING)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        count = queryset.update(revoked=True)
        self.message_user(request, f"{count} token(s) revoked.")
