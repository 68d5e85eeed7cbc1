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
    return _check_django_side_settings()


def _check_django_side_settings():
    """The WORQR keys read outside the engine (webhooks, Tasks backend)."""
    from django.core.exceptions import ImproperlyConfigured

    from .conf import setting
    from .webhooks import allowed_hosts, callback_timeout

    errors = []
    for check in (allowed_hosts, callback_timeout):
        try:
            check()
        except ImproperlyConfigured as exc:
            errors.append(Error(str(exc), hint="Fix settings.WORQR.", id="queues.E001"))
    if not isinstance(setting("TASKS_ON_COMMIT", True), bool):
        errors.append(Error("WORQR['TASKS_ON_COMMIT'] must be True or False", id="queues.E001"))
    return errors
