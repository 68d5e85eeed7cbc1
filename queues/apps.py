from django.apps import AppConfig
from django.conf import settings
from django.utils.module_loading import autodiscover_modules

from . import checks  # registers the system checks
from .conf import build_config, setup
from .engine.errors import ConfigurationError
from .published_keys import refuse_published


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Here, not at the top: it imports the auth models, and Django imports this module
        # before its app registry is ready, when no models module can be imported.
        from .dashboard.revocation import connect_signals

        # A published key stops every process at start (with DEBUG off), not just `check --deploy`.
        refuse_published(settings.SECRET_KEY, getattr(settings, "SECRET_KEY_FALLBACKS", ()), settings.DEBUG)

        connect_signals()  # logouts and lost permissions close the dashboard's open sockets

        try:
            build_config()
        except ConfigurationError:
            return  # reported by the system check queues.E001
        setup()
        try:
            autodiscover_modules("tasks")
        except ConfigurationError as exc:  # a bad @handler option: reported by the system check
            checks.HANDLER_ERRORS.append(exc)
        if getattr(settings, "TASKS", None):  # handlers of the Tasks framework backend's queues
            # Only then: the backend needs an optional dependency, the Tasks framework
            # (django.tasks on Django 6; the django-tasks backport on Django 5.2).
            from .backends import register_handlers

            register_handlers()
