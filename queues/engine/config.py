"""Timeouts, TTLs and limits, in one place, each with why it has its value.

``Config`` is a plain frozen dataclass; the Django app builds one from ``settings.WORQR`` and the
engine never reads settings itself.
"""

import base64
import binascii
from dataclasses import dataclass, fields, replace

from .errors import ConfigurationError
from .numbers import MAX_RETRIES, MAX_SECONDS, is_finite, shown
from .retention import Retention

#: How long an enqueue waits for a connection to Redis to open (s; or ENQUEUE_SOCKET_TIMEOUT if
#: shorter): a Redis host that does not answer costs a try this long at most.
ENQUEUE_CONNECT_TIMEOUT = 1.0


#: The most failures kept per queue (``FAILURE_HISTORY``): each entry may hold a 20,000-character
#: traceback.
FAILURE_HISTORY_MAX = 10_000


@dataclass(frozen=True)
class Config:
    #: Redis URL; empty means "start the embedded Redis" (decided by the Django layer).
    redis_url: str = ""
    #: A worker is presumed dead this long after its last heartbeat (the seed's 3 s).
    heartbeat_ttl: float = 3.0
    #: How often a worker refreshes its heartbeat; well under the TTL so one late beat is harmless.
    heartbeat_interval: float = 1.0
    #: A lock outlives a dead holder by at most this long; must exceed the heartbeat TTL so a
    #: live holder's lock never lapses between two keep-alives (resque-locket's 35 s).
    lock_ttl: float = 35.0
    #: Largest payload accepted, in bytes (1 MiB): keeps one task from filling Redis.
    max_payload_bytes: int = 1024 * 1024
    #: Largest return value kept (``keep_result``, the Tasks backend's results), in bytes (16
    #: MiB): a bigger one fails its attempt, saying so. Well under Redis's 512 MB for one value,
    #: and a worker's batch of acknowledgements carries at most this much of them in one call.
    max_result_bytes: int = 16 * 1024 * 1024
    #: Failures kept per queue in the failure history (the POC's last 100).
    failure_history: int = 100
    #: Default retries after a failed attempt (0: a failure is final unless the handler says).
    retries: int = 0
    #: Default base backoff in seconds: retry n waits backoff * 2**(n-1) (10, 20, 40 ...).
    backoff: float = 10.0
    #: Longest wait between two attempts (1 h), so a task with many retries stays visible.
    backoff_max: float = 3600.0
    #: Jitter fraction added to backoffs (0.1 = up to +10 %), so retries of a burst spread out.
    backoff_jitter: float = 0.1
    #: A task past its timeout plus this grace is taken from its (stuck) holder by the reaper.
    timeout_grace: float = 10.0
    #: How long the Django Tasks backend keeps results (1 day).
    result_ttl: float = 86400.0
    #: An isolated handler stopped by a timeout or a cancel gets SIGTERM, then SIGKILL this long
    #: after: 5 s lets its ``finally`` blocks close files and connections, yet a handler stuck in
    #: C code gives its slot (and its lock) back well within a typical timeout.
    kill_grace: float = 5.0
    #: Make OpenTelemetry spans (``engine.tracing``) when ``opentelemetry-api`` is importable; the
    #: application's SDK decides what is recorded and where it goes.
    opentelemetry: bool = True
    #: When > 0, enqueue and the scripts that end a task WAIT until that many replicas have the
    #: write, so that what was acknowledged survives a failover (0: don't wait, as plain Redis).
    min_replicas_ack: int = 0
    #: How long such a WAIT may take, in seconds; a write not replicated in time raises
    #: NotReplicated to a producer (the worker logs it and goes on).
    replicas_ack_timeout: float = 1.0
    #: How long ``Queue.enqueue`` retries while Redis is unreachable before raising
    #: RedisUnavailable: rides out a Redis restart or failover, yet a web request never hangs.
    enqueue_retry_for: float = 2.0
    #: How long one try of an enqueue waits for Redis's reply (the enqueue client's socket
    #: timeout; plus REPLICAS_ACK_TIMEOUT when MIN_REPLICAS_ACK waits for replicas): an enqueue
    #: returns or raises within ENQUEUE_RETRY_FOR + this (+ up to the 1 s connect timeout when its
    #: last try also waits to connect). 2 s is far above a healthy call's
    #: milliseconds (a reply later than that is treated as lost: the call is sent again, which
    #: adds nothing), yet keeps a stalled Redis from holding a request for long.
    enqueue_socket_timeout: float = 2.0
    #: How long ids enqueued from the outbox are remembered, so that pushing one again is a no-op
    #: even after its task finished (1 h: far past any relay delay; costs ~100 bytes per id).
    enqueue_dedup_for: float = 3600.0
    #: The most queues there may be: an enqueue that would make one more is refused
    #: (TooManyQueues), so that producers (an API token that may enqueue) can't make queues
    #: without end, each costing every page and scrape that lists them. Workers and schedules
    #: still make the queues they serve.
    max_queues: int = 10_000
    #: A queue with nothing in it (no task in any state) and no worker, paused state or limits,
    #: unused this long (seconds; 7 days, what its history shows), is forgotten by the workers'
    #: sweep: its keys deleted, and it no longer counts under MAX_QUEUES. 0: never.
    queue_forget_after: float = 7 * 86400.0
    #: Keys of encrypted payloads (urlsafe base64 of 32 bytes), the newest first: it encrypts,
    #: all decrypt (``crypto``). Checked here, so the system check refuses a malformed one.
    encryption_keys: tuple = ()
    #: The queues whose payloads are stored encrypted.
    encrypted_queues: frozenset = frozenset()
    #: How long the record of ended tasks is kept, by outcome, and how many per queue at most
    #: (``WORQR["RETENTION"]``, a dict: ``retention.py``); pruned by the workers.
    retention: Retention = Retention()

    def __post_init__(self):
        if self.heartbeat_interval <= 0 or self.heartbeat_ttl <= 0:
            raise ConfigurationError("HEARTBEAT_INTERVAL and HEARTBEAT_TTL must be positive")
        if self.heartbeat_interval * 2 > self.heartbeat_ttl:
            raise ConfigurationError(
                "HEARTBEAT_TTL must be at least twice HEARTBEAT_INTERVAL, or one late beat gets a live worker reaped"
            )
        if self.lock_ttl <= self.heartbeat_ttl:
            raise ConfigurationError("LOCK_TTL must be longer than HEARTBEAT_TTL")
        if self.lock_ttl - 2 * self.heartbeat_interval < 10:
            raise ConfigurationError(
                "LOCK_TTL must be at least 10 s + 2 x HEARTBEAT_INTERVAL: a Redis outage shorter than "
                "LOCK_TTL - 2 x HEARTBEAT_INTERVAL reaps no worker, and that must cover outages of 10 s"
            )
        if self.max_payload_bytes <= 0:
            raise ConfigurationError("MAX_PAYLOAD_BYTES must be positive")
        if not 1 <= self.failure_history <= FAILURE_HISTORY_MAX:  # a count the scripts' LTRIM takes
            raise ConfigurationError(f"FAILURE_HISTORY must be an integer from 1 to {FAILURE_HISTORY_MAX:,}")
        if not 1024 <= self.max_result_bytes <= 256 * 1024 * 1024:
            raise ConfigurationError("MAX_RESULT_BYTES must be an integer from 1024 to 268435456 (256 MiB)")
        if not 0 <= self.retries <= MAX_RETRIES:
            raise ConfigurationError(f"RETRIES must be an integer from 0 to {MAX_RETRIES:,}")
        if not (0 <= self.backoff <= MAX_SECONDS and 0 <= self.backoff_max <= MAX_SECONDS):
            raise ConfigurationError(f"BACKOFF and BACKOFF_MAX must be from 0 to {MAX_SECONDS:,} seconds (100 years)")
        if not 0 <= self.backoff_jitter <= 1 or self.timeout_grace < 0:
            raise ConfigurationError("BACKOFF_JITTER must be a fraction from 0 to 1, and TIMEOUT_GRACE >= 0")
        if self.min_replicas_ack < 0 or not 0 < self.replicas_ack_timeout <= 3600:
            raise ConfigurationError("MIN_REPLICAS_ACK must be >= 0 and REPLICAS_ACK_TIMEOUT between 0 and 3600 s")
        if not 0 <= self.enqueue_retry_for <= 300 or not 60 <= self.enqueue_dedup_for <= 7 * 86400:
            raise ConfigurationError(
                "ENQUEUE_RETRY_FOR must be between 0 and 300 s and ENQUEUE_DEDUP_FOR between 60 s and 7 days"
            )
        if not 0.05 <= self.enqueue_socket_timeout <= 60:
            raise ConfigurationError("ENQUEUE_SOCKET_TIMEOUT must be between 0.05 and 60 seconds")
        if not 0 <= self.kill_grace <= 3600:
            raise ConfigurationError("KILL_GRACE must be between 0 and 3600 seconds")
        if not 1 <= self.max_queues <= 10_000_000:
            raise ConfigurationError("MAX_QUEUES must be an integer from 1 to 10000000")
        if self.encryption_keys or self.encrypted_queues:
            _check_encryption(self.encryption_keys, self.encrypted_queues)
        if self.queue_forget_after != 0 and not 3600 <= self.queue_forget_after <= 366 * 86400:
            raise ConfigurationError("QUEUE_FORGET_AFTER must be 0 (never) or between 3600 s and 366 days")

    @classmethod
    def from_mapping(cls, mapping):
        """Build from a ``WORQR``-style dict with upper-case keys; unknown keys are an error."""
        names = {f.name.upper(): f.name for f in fields(cls)}
        unknown = sorted(set(mapping) - set(names))
        if unknown:
            raise ConfigurationError(f"unknown WORQR setting(s): {', '.join(unknown)}")
        kwargs = {}
        for key, value in mapping.items():
            if key == "RETENTION":
                kwargs["retention"] = Retention.parse(value)
                continue
            kind = type(getattr(cls, names[key]))
            if kind in (tuple, frozenset):  # a list of strings
                if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                    raise ConfigurationError(f"WORQR[{key!r}] must be a list of strings")
                kwargs[names[key]] = kind(value)
                continue
            if kind is bool:
                if not isinstance(value, bool):
                    raise ConfigurationError(f"WORQR[{key!r}] must be True or False, not {value!r}")
                kwargs[names[key]] = value
                continue
            if kind is not str and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigurationError(f"WORQR[{key!r}] must be a number, not {value!r}")
            if kind is not str and not is_finite(value):  # a NaN passes every range check below
                raise ConfigurationError(f"WORQR[{key!r}] must be a finite number, not {shown(value)}")
            if kind is int and value != int(value):
                raise ConfigurationError(f"WORQR[{key!r}] must be a whole number, not {value!r}")
            if kind is str and not isinstance(value, str):
                raise ConfigurationError(f"WORQR[{key!r}] must be a string")
            kwargs[names[key]] = kind(value) if kind is int else value
        return cls(**kwargs)

    @property
    def enqueue_attempt_timeout(self):
        """How long one try of an enqueue waits for its reply (s): the socket timeout, plus the
        wait for replicas when MIN_REPLICAS_ACK asks for one (it is part of the same call)."""
        return self.enqueue_socket_timeout + (self.replicas_ack_timeout if self.min_replicas_ack > 0 else 0.0)

    def with_(self, **changes):
        return replace(self, **changes)


def _check_encryption(texts, queues):
    """ENCRYPTION_KEYS: each urlsafe base64 of 32 bytes; ENCRYPTED_QUEUES: queue names, and keys."""
    for text in texts:
        try:
            raw = base64.urlsafe_b64decode(text.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise ConfigurationError("WORQR['ENCRYPTION_KEYS']: a key is not urlsafe base64") from None
        if len(raw) != 32:
            raise ConfigurationError(f"WORQR['ENCRYPTION_KEYS']: a key must be 32 bytes once decoded, not {len(raw)}")
    if queues and not texts:
        raise ConfigurationError("WORQR['ENCRYPTED_QUEUES'] needs WORQR['ENCRYPTION_KEYS'] (the first encrypts)")
