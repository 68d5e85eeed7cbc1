"""Admin of worqr's models.

- AuditLog (the dashboard, issue 5): read-only; rows are written only by dashboard and API
  actions, so nobody can add, edit or forge them here.
- ApiToken: registered by the HTTP API (issue 6) below.
"""

from django.contrib import admin

from .models import AuditLog


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
