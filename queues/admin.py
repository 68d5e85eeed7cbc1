"""Admin of worqr's models.

- AuditLog: read-only; rows are written only by dashboard and API actions, so nobody can add,
  edit or forge them here.
- ApiToken: the key is shown once, on the page that answers the creation (never in a message,
  which would travel in a cookie); a user may grant only the permissions they hold themselves
  (superusers: all), on create and on change. Revocation is final (``ApiToken.save``): a
  revoked token is shown read-only, and no form or crafted post makes it live again.
"""

from django import forms
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from .models import ACTION_PERMISSIONS, ApiToken, AuditLog


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


def action_permissions():
    """The permissions a token can carry: the actions the API checks."""
    return Permission.objects.filter(content_type__app_label="queues", codename__in=ACTION_PERMISSIONS)


def grantable(user):
    """The action permissions ``user`` may give a token: those they hold (superusers: all)."""
    return {p.pk for p in action_permissions() if user.has_perm(f"queues.{p.codename}")}


REVOKED_HELP = (
    "Revoking is final: the key never works again, and the token can't be changed. Make a new token to replace it."
)


class ApiTokenForm(forms.ModelForm):
    """Checks that the permissions added to a token are ones the editing user holds.

    ``grantable`` and ``current`` (permission pks) are set by ``ApiTokenAdmin.get_form``; only
    those are offered, and a crafted post adding another is refused with its name.
    """

    grantable, current = frozenset(), frozenset()

    class Meta:
        model = ApiToken
        fields = ("name", "permissions", "revoked")
        help_texts = {"revoked": REVOKED_HELP}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "permissions" not in self.fields:  # a revoked token, shown read-only
            return
        field = self.fields["permissions"]
        field.queryset = action_permissions()
        offered = [(p.pk, str(p)) for p in field.queryset if p.pk in self.grantable | self.current]
        getattr(field.widget, "widget", field.widget).choices = offered

    def clean_permissions(self):
        chosen = self.cleaned_data["permissions"]
        refused = sorted(f"queues.{p.codename}" for p in chosen if p.pk not in self.grantable | self.current)
        if refused:
            raise forms.ValidationError(
                f"You can only grant permissions you hold yourself; you lack {', '.join(refused)}."
            )
        return chosen

    def clean_revoked(self):
        if self.instance.pk and self.instance.revoked and not self.cleaned_data["revoked"]:
            raise forms.ValidationError("This token is revoked, and revocation is final: make a new token.")
        return self.cleaned_data["revoked"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created here or with ``manage.py api_token``; the key is shown once."""

    form = ApiTokenForm
    list_display = ("name", "prefix", "created", "last_used", "revoked")
    list_filter = ("revoked",)
    search_fields = ("name", "prefix")
    fields = ("name", "permissions", "revoked", "prefix", "created", "last_used")
    readonly_fields = ("prefix", "created", "last_used")
    filter_horizontal = ("permissions",)
    actions = ["revoke"]

    def has_change_permission(self, request, obj=None):
        """A revoked token is shown read-only: revocation is final."""
        return super().has_change_permission(request, obj) and not (obj is not None and obj.revoked)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.revoked:
            context["subtitle"] = f"{obj}: revoked, for good. Make a new token to replace it."
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        current = frozenset(obj.permissions.values_list("pk", flat=True)) if obj else frozenset()
        return type(form.__name__, (form,), {"grantable": frozenset(grantable(request.user)), "current": current})

    def save_model(self, request, obj, form, change):
        if not change:
            obj._raw_key = obj.new_key()  # shown by response_add, never stored
        super().save_model(request, obj, form, change)

    def response_add(self, request, obj, post_url_continue=None):
        """The page that shows the new key once (not cached), instead of a redirect and a message."""
        context = {
            **self.admin_site.each_context(request),
            "title": "API token created",
            "opts": self.opts,
            "token": obj,
            "raw_key": obj._raw_key,
            "change_url": reverse("admin:queues_apitoken_change", args=[obj.pk]),
            "changelist_url": reverse("admin:queues_apitoken_changelist"),
        }
        response = TemplateResponse(request, "admin/queues/apitoken/created.html", context)
        add_never_cache_headers(response)
        return response

    @admin.action(description="Revoke the selected tokens (for good)")
    def revoke(self, request, queryset):
        count = ApiToken.revoke(queryset)
        self.message_user(request, f"{count} token(s) revoked, for good: make new ones to replace them.")
