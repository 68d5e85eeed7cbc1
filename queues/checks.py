"""System checks: a bad WORQR setting stops ``manage.py`` at startup with a clear message."""

from django.core.checks import Error, register

from .engine.errors import ConfigurationError


@register()
def check_worqr_settings(app_configs, **kwargs):
    from .conf import build_config

    try:
        build_config()
    except ConfigurationError as exc:
        return [Error(f"WORQR setting is invalid: {exc}", hint="Fix settings.WORQR.", id="queues.E001")]
    return []
