"""Reads ``settings.WORQR`` (the only module that does) and sets up the engine's connection."""

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from . import embedded
from .engine import Config, connection
from .engine.errors import ConfigurationError
from .engine.schedule_settings import parse_all


def var_dir():
    return Path(getattr(settings, "WORQR_VAR_DIR", Path(settings.BASE_DIR) / "var"))


def build_config():
    """The engine Config from ``settings.WORQR``; raises ConfigurationError when it is bad."""
    raw = dict(getattr(settings, "WORQR", {}) or {})
    for django_only in (
        "CALLBACK_ALLOWED_HOSTS",
        "CALLBACK_TIMEOUT",
        "TASKS_ON_COMMIT",
        "SCHEDULES",
        "LOG_FORMAT",
        "SEARCH_SCAN_LIMIT",
        "OUTBOX_DATABASES",
    ):
        raw.pop(django_only, None)
    return Config.from_mapping(raw)


def setting(name, default=None):
    return (getattr(settings, "WORQR", {}) or {}).get(name, default)


#: Entries a dashboard search looks at per request (``WORQR["SEARCH_SCAN_LIMIT"]``).
SEARCH_SCAN_LIMIT = 10000


def search_scan_limit():
    """``WORQR["SEARCH_SCAN_LIMIT"]``: an integer from 100 to 1,000,000; raises ImproperlyConfigured."""
    value = setting("SEARCH_SCAN_LIMIT", SEARCH_SCAN_LIMIT)
    if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 1_000_000:
        raise ImproperlyConfigured(f"WORQR['SEARCH_SCAN_LIMIT'] must be an integer from 100 to 1000000, not {value!r}")
    return value


#: The worker's log formats (``WORQR["LOG_FORMAT"]``, ``manage.py worker --log-format``).
LOG_FORMATS = ("text", "json")


def log_format():
    """``WORQR["LOG_FORMAT"]``: "text" (the default) or "json"; raises ImproperlyConfigured."""
    value = setting("LOG_FORMAT", "text")
    if value not in LOG_FORMATS:
        raise ImproperlyConfigured(f"WORQR['LOG_FORMAT'] must be 'text' or 'json', not {value!r}")
    return value


def schedule_specs():
    """The schedules of ``WORQR["SCHEDULES"]`` ([ScheduleSpec]), or None when the key is absent
    (then workers leave the schedules in Redis as they are). Raises InvalidSchedule."""
    raw = setting("SCHEDULES", None)
    if raw is None:
        return None
    return parse_all(raw, max_payload_bytes=build_config().max_payload_bytes)


def setup():
    """Make the engine's default connection from settings (the embedded Redis starts lazily)."""
    try:
        config = build_config()
    except ConfigurationError as exc:
        raise ImproperlyConfigured(f"WORQR: {exc}") from exc
    if config.redis_url:
        return connection.configure(config, config.redis_url)
    return connection.configure(config, lambda: embedded.ensure(var_dir()))


def get_connection():
    try:
        return connection.get_default()
    except ConfigurationError:
        return setup()
