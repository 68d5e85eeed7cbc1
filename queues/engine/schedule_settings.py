"""Schedules as settings declare them (``WORQR["SCHEDULES"]``), checked and made into
``ScheduleSpec``: what is synced to Redis, as one JSON document per schedule.

Each entry is ``name: {key: value}``. The name follows the rules of queue names. Keys:

- ``queue`` (required): where the runs go;
- exactly one of ``cron`` (5 fields, or ``@hourly`` ... ``@yearly``) and ``every`` (seconds, a
  number >= 1);
- ``payload`` (text, default ``""``), ``timezone`` (IANA name, default ``UTC``), ``enabled``
  (default True), ``missed`` (``"skip"``, the default, or ``"once"``), ``overlap`` (default True);
- the enqueue options ``retries``, ``timeout``, ``backoff``, ``lock``, ``callback``.

Every problem raises (or, from ``check_all``, returns) ``InvalidSchedule`` naming the schedule and
the key at fault. Nothing here touches Redis.
"""

import hashlib
import json
import time
from dataclasses import dataclass, field

from . import keys, ticks
from .enqueueing import task_options
from .errors import InvalidInput, InvalidSchedule
from .numbers import is_finite

MISSED_POLICIES = ("skip", "once")
OPTION_KEYS = ("retries", "timeout", "backoff", "lock", "callback")
KEYS = ("queue", "cron", "every", "payload", "timezone", "enabled", "missed", "overlap", *OPTION_KEYS)
#: Longest interval accepted for ``every`` (a year): longer is a cron job.
EVERY_MAX = 366 * 86400
#: Where each enqueue option goes in the task hash (the names ``enqueue`` uses; task.py).
_TASK_FIELDS = {"retries": "r", "timeout": "t", "backoff": "b", "lock": "lk", "callback": "cb"}


@dataclass(frozen=True)
class ScheduleSpec:
    """One schedule as declared: its timing, payload, policies and enqueue options."""

    name: str
    queue: str
    timing: ticks.Timing
    payload: str = ""
    enabled: bool = True
    missed: str = "skip"
    overlap: bool = True
    options: dict = field(default_factory=dict)  # the enqueue options given, as given

    def document(self, lock=None, partition=None):
        """The JSON document synced to Redis. ``opts`` holds the task hash fields of the enqueue
        options, as text (the fire script copies them); ``lock`` is a lock key the queue's
        handler derives from the payload, used when the schedule names none; ``partition`` the
        partition key the handler's ``partition`` function gives the payload (its runs are
        listed in that partition)."""
        opts = {}
        texts = task_options(
            *(self.options.get(k) for k in ("retries", "timeout", "backoff", "lock", "callback")), None
        )
        for name, text in zip(OPTION_KEYS, texts):
            if text != "":
                opts[_TASK_FIELDS[name]] = text
        if lock and "lk" not in opts:
            opts["lk"] = lock
        if partition:
            opts["pk"] = partition
        doc = {
            "name": self.name,
            "queue": self.queue,
            "cron": self.timing.cron,
            "every": self.timing.every,
            "timezone": self.timing.timezone,
            "payload": self.payload,
            "enabled": self.enabled,
            "missed": self.missed,
            "overlap": self.overlap,
            "options": self.options,
            "opts": opts,
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def version_of(document):
    """A short digest of a synced document: it changes whenever the settings do."""
    return hashlib.sha1(document.encode()).hexdigest()[:16]


def from_document(document):
    """The ScheduleSpec a synced document describes."""
    d = json.loads(document)
    timing = ticks.Timing(cron=d.get("cron"), every=d.get("every"), timezone=d.get("timezone") or "UTC")
    return ScheduleSpec(
        name=d["name"],
        queue=d["queue"],
        timing=timing,
        payload=d.get("payload", ""),
        enabled=d.get("enabled", True),
        missed=d.get("missed", "skip"),
        overlap=d.get("overlap", True),
        options=d.get("options") or {},
    )


def _bad(name, key, message):
    return InvalidSchedule(name, key, message)


def _is_number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float)) and is_finite(value)


def parse(name, raw, *, max_payload_bytes=None, now_ms=None):
    """The ScheduleSpec of one entry; raises InvalidSchedule naming the schedule and the key."""
    try:
        keys.check_queue_name(name)
    except InvalidInput as exc:
        raise _bad(name, None, f"bad schedule name: {str(exc).replace('queue name', 'name')}") from None
    if not isinstance(raw, dict):
        raise _bad(name, None, f"must be a dict of settings, not {type(raw).__name__}")
    unknown = sorted(str(k) for k in raw if k not in KEYS)
    if unknown:
        raise _bad(name, unknown[0], f"unknown key (the keys are: {', '.join(KEYS)})")
    if "queue" not in raw:
        raise _bad(name, "queue", "is required: the queue the runs go to")
    try:
        queue = keys.check_queue_name(raw["queue"])
    except InvalidInput as exc:
        raise _bad(name, "queue", str(exc)) from None
    timing = _timing(name, raw, now_ms)
    payload = raw.get("payload", "")
    if not isinstance(payload, str):
        raise _bad(name, "payload", f"must be text, not {type(payload).__name__}")
    try:
        size = len(payload.encode("utf-8"))
    except UnicodeEncodeError:
        raise _bad(name, "payload", "must be valid text (it holds an unpaired surrogate)") from None
    if max_payload_bytes is not None and size > max_payload_bytes:
        raise _bad(name, "payload", f"is {size} bytes, over MAX_PAYLOAD_BYTES ({max_payload_bytes})")
    for key in ("enabled", "overlap"):
        if key in raw and not isinstance(raw[key], bool):
            raise _bad(name, key, f"must be True or False, not {raw[key]!r}")
    missed = raw.get("missed", "skip")
    if missed not in MISSED_POLICIES:
        raise _bad(name, "missed", f"must be 'skip' or 'once', not {missed!r}")
    options = {k: raw[k] for k in OPTION_KEYS if raw.get(k) is not None}
    for key, value in options.items():
        try:
            task_options(*(value if k == key else None for k in OPTION_KEYS), None)
        except InvalidInput as exc:
            raise _bad(name, key, str(exc)) from None
    return ScheduleSpec(
        name=name,
        queue=queue,
        timing=timing,
        payload=payload,
        enabled=raw.get("enabled", True),
        missed=missed,
        overlap=raw.get("overlap", True),
        options=options,
    )


def _timing(name, raw, now_ms):
    has_cron, has_every = raw.get("cron") is not None, raw.get("every") is not None
    if has_cron == has_every:
        which = "both" if has_cron else "neither"
        raise _bad(name, "cron" if has_cron else "every", f"give exactly one of 'cron' and 'every' ({which} given)")
    tz = raw.get("timezone", "UTC")
    if not isinstance(tz, str):
        raise _bad(name, "timezone", f"must be an IANA name such as 'Europe/Paris', not {tz!r}")
    try:
        ticks.zone(tz)
    except ticks.TimingError as exc:
        raise _bad(name, "timezone", str(exc)) from None
    if has_every:
        every = raw["every"]
        if not _is_number(every) or not 1 <= every <= EVERY_MAX:
            raise _bad(name, "every", f"must be a number of seconds from 1 to {EVERY_MAX}, not {every!r}")
        timing = ticks.Timing(every=float(every) if isinstance(every, float) else int(every), timezone=tz)
    else:
        try:
            ticks.check_cron(raw["cron"])
        except ticks.TimingError as exc:
            raise _bad(name, "cron", str(exc)) from None
        timing = ticks.Timing(cron=raw["cron"].strip(), timezone=tz)
    try:
        ticks.next_after(timing, int(time.time() * 1000) if now_ms is None else now_ms)
    except ticks.TimingError as exc:
        raise _bad(name, "cron", str(exc)) from None
    return timing


def check_all(mapping, *, max_payload_bytes=None):
    """(specs, errors): every entry of a SCHEDULES mapping checked; errors are InvalidSchedule."""
    if not isinstance(mapping, dict):
        return [], [
            InvalidSchedule("*", None, f"SCHEDULES must be a dict of name: settings, not {type(mapping).__name__}")
        ]
    specs, errors = [], []
    for name, raw in mapping.items():
        try:
            specs.append(parse(name, raw, max_payload_bytes=max_payload_bytes))
        except InvalidSchedule as exc:
            errors.append(exc)
    return specs, errors


def parse_all(mapping, *, max_payload_bytes=None):
    """[ScheduleSpec] for a SCHEDULES mapping; raises the first InvalidSchedule."""
    specs, errors = check_all(mapping, max_payload_bytes=max_payload_bytes)
    if errors:
        raise errors[0]
    return specs
