import os

from django.apps import AppConfig


class ChaosConfig(AppConfig):
    name = "chaos"
    verbose_name = "Chaos soak"

    def ready(self):
        if os.environ.get("WORQR_CHAOS_DIR"):  # a worker started by manage.py chaos
            # Here, and only then: it registers the soak queue's handler (never in other processes).
            from . import handler  # noqa: F401
