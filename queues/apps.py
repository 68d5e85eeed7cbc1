import os

from django.apps import AppConfig
from django.conf import settings
from django.utils.module_loading import autodiscover_modules


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
        from .conf import build_config, setup
        from .dashboard.revocation import connect_signals
        from .engine.errors import ConfigurationError
        from .published_keys import refuse_published

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
        if os.environ.get("WORQR_CHAOS_DIR"):  # a worker started by manage.py chaos
            from .chaos import handler  # noqa: F401  (registers the soak queue's handler)
        if getattr(settings, "TASKS", None):  # handlers of the Tasks framework backend's queues
            from .backends import register_handlers

            register_handlers()
