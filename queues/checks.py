"""System checks: a bad WORQR setting stops ``manage.py`` at startup with a clear message."""

from django.core.checks import Error, register
from django.core.checks import Warning as CheckWarning
from django.core.exceptions import ImproperlyConfigured

from .conf import build_config, log_format, search_scan_limit, setting
from .engine import tracing
from .engine.errors import ConfigurationError, InvalidSchedule
from .engine.limits import check_limits
from .engine.registry import all_handlers
from .engine.schedule_settings import check_all
from .engine.schedules import check_handler
from .outbox import databases
from .webhooks import allowed_hosts, callback_timeout, check_callback

#: Errors raised by ``@handler`` while the apps' ``tasks`` modules were imported at start-up (a
#: bad option: concurrency, rate, partition...), reported as queues.E030 by the check below.
HANDLER_ERRORS = []


@register("worqr")
def check_handlers(app_configs, **kwargs):
    """A bad ``@handler`` option (its queue and option named) stops ``manage.py`` at start-up."""
    errors = [Error(str(exc), hint="Fix the @handler options.", id="queues.E030") for exc in HANDLER_ERRORS]
    for queue, spec in all_handlers().items():
        lim = spec.limits
        try:
            check_limits(queue, lim.concurrency, lim.rate, lim.partition, lim.partition_concurrency, lim.partition_rate)
        except ConfigurationError as exc:
            errors.append(Error(str(exc), hint="Fix the @handler options.", id="queues.E030", obj=f"queue {queue}"))
    return errors


@register("worqr")
def check_worqr_settings(app_configs, **kwargs):
    try:
        build_config()
    except ConfigurationError as exc:
        return [Error(f"WORQR setting is invalid: {exc}", hint="Fix settings.WORQR.", id="queues.E001")]
    return _check_django_side_settings()


def _check_django_side_settings():
    """The WORQR keys read outside the engine (webhooks, Tasks backend, the worker's logs)."""
    errors = []
    for check in (allowed_hosts, callback_timeout, log_format, search_scan_limit, databases):
        try:
            check()
        except ImproperlyConfigured as exc:
            errors.append(Error(str(exc), hint="Fix settings.WORQR.", id="queues.E001"))
    if not isinstance(setting("TASKS_ON_COMMIT", True), bool):
        errors.append(Error("WORQR['TASKS_ON_COMMIT'] must be True or False", id="queues.E001"))
    if setting("OPENTELEMETRY") is True and not tracing.AVAILABLE:
        errors.append(
            CheckWarning(
                "WORQR['OPENTELEMETRY'] is True but opentelemetry-api is not installed: no spans are made",
                hint="pip install 'worqr[otel]' (or opentelemetry-api)",
                id="queues.W001",
            )
        )
    return errors


#: The check id of a bad schedule, by the key at fault (README: "Periodic tasks").
SCHEDULE_ERROR_IDS = {
    None: "queues.E020",  # the schedule as a whole: its name, not a dict, SCHEDULES not a dict
    "cron": "queues.E021",
    "every": "queues.E021",
    "timezone": "queues.E022",
    "queue": "queues.E023",
    "payload": "queues.E024",
    "enabled": "queues.E024",
    "missed": "queues.E024",
    "overlap": "queues.E024",
    "retries": "queues.E025",
    "timeout": "queues.E025",
    "backoff": "queues.E025",
    "lock": "queues.E025",
    "partition": "queues.E025",
    "callback": "queues.E025",
}
UNKNOWN_KEY_ID = "queues.E026"


@register("worqr")
def check_schedules(app_configs, **kwargs):
    """Each bad entry of WORQR["SCHEDULES"]: one error naming the schedule and the key."""
    raw = setting("SCHEDULES", None)
    if raw is None:
        return []
    try:
        limit = build_config().max_payload_bytes
    except ConfigurationError:
        limit = None  # reported by queues.E001
    specs, problems = check_all(raw, max_payload_bytes=limit)
    errors = []
    for exc in problems:
        code = SCHEDULE_ERROR_IDS.get(exc.field, UNKNOWN_KEY_ID)  # a field not listed is an unknown key
        errors.append(
            Error(
                f"WORQR['SCHEDULES']: {exc}",
                hint="Fix settings.WORQR['SCHEDULES'].",
                id=code,
                obj=f"schedule {exc.schedule}",
            )
        )
    for spec in specs:
        problem = _handler_problem(spec)
        if problem is not None:
            errors.append(
                Error(
                    f"WORQR['SCHEDULES']: {problem}",
                    hint="Fix settings.WORQR['SCHEDULES'] (the payload) or the handler's function.",
                    id=SCHEDULE_ERROR_IDS[problem.field],
                    obj=f"schedule {spec.name}",
                )
            )
        if spec.options.get("callback") is not None:
            try:
                check_callback(spec.options["callback"])
            except (ValueError, ImproperlyConfigured) as exc:
                errors.append(
                    Error(
                        f"WORQR['SCHEDULES']: schedule {spec.name!r}, 'callback': {exc}",
                        hint="Fix settings.WORQR['SCHEDULES'].",
                        id=SCHEDULE_ERROR_IDS["callback"],
                        obj=f"schedule {spec.name}",
                    )
                )
    return errors


def _handler_problem(spec):
    """The InvalidSchedule of a schedule whose payload the queue's handler can't take (its lock
    or partition function fails on it), or None: what the worker's sync would meet."""
    try:
        check_handler(spec)
    except InvalidSchedule as exc:
        return exc
    return None
