"""The transactional outbox: a task is enqueued if and only if its transaction committed.

``Queue.enqueue(..., on_commit=True)`` inside ``transaction.atomic()`` (and the Tasks backend,
and ``durable=True``) writes each task as an ``OutboxTask`` row in the caller's database, in the
caller's transaction. Then:

1. **fast path**: right after the commit (``transaction.on_commit``; at once for ``durable=True``
   outside a transaction) the rows are pushed to Redis in one script call per batch and
   deleted;
2. **relay**: a row left behind (the process died between the commit and the push, Redis was
   unreachable, the delete failed) is pushed by the relay every worker runs (``Relay``): it
   looks every ``RELAY_INTERVAL`` seconds (half that while Redis is unreachable) for rows older
   than ``RELAY_MIN_AGE`` (younger ones are still being pushed by their producer), so a row is
   in Redis about a second after Redis is reachable again.

A push is idempotent by task id: the enqueue script remembers the ids pushed for
``WORQR["ENQUEUE_DEDUP_FOR"]`` seconds (1 hour) and a second push of one of them, even after its
task finished, adds nothing. So the fast path and the relay (or two relays) racing on a row, or
a push whose row could not be deleted, never run a task twice. A rolled back transaction or
savepoint takes its rows and its ``on_commit`` push with it: nothing is enqueued.
"""

import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.utils import timezone

from .conf import setting
from .engine import enqueueing, faults
from .engine.backoff import Backoff
from .engine.connection import NETWORK_ERRORS
from .engine.errors import RedisUnavailable, WorqrError
from .engine.queue import Queue

log = logging.getLogger("worqr.outbox")

#: How often the relay looks for rows left behind, in seconds.
RELAY_INTERVAL = 0.5
#: Rows younger than this (seconds) are left to the producer that wrote them (its fast path).
RELAY_MIN_AGE = 0.5
#: How long a push retries (seconds): enough for a new connection after one was cut, short
#: enough not to hold up the request whose commit it follows (the relay takes over).
PUSH_RETRY_FOR = 0.5
#: How long (seconds) the relay keeps trying to delete the rows it pushed while a SQLite database is
#: locked (then they are pushed again next round: a no-op).
RELAY_DELETE_RETRY_FOR = 5.0
#: Rows the relay pushes per round (one enqueue script call per queue and options among them).
RELAY_BATCH = 500
#: After an unexpected error (logged with its traceback) the relay looks again after this many
#: seconds, doubling up to RESTART_MAX while it keeps failing.
RESTART_AFTER = 1.0
RESTART_MAX = 30.0


@dataclass(frozen=True)
class Entry:
    """One task as the outbox keeps it: what the enqueue script needs, with an absolute due time."""

    task_id: str
    payload: bytes
    unique: str
    kind: str
    when: str
    options: tuple

    def spec(self):
        return json.dumps({"w": self.when, "o": list(self.options), "u": self.unique, "k": self.kind})

    @classmethod
    def from_row(cls, row):
        spec = json.loads(row.spec)
        return cls(row.task_id, bytes(row.payload), spec["u"], spec["k"], spec["w"], tuple(spec["o"]))


def absolute(when):
    """An enqueue's ``when`` with a delay ('+<ms>') made a due time ('@<ms>'), so that a row pushed
    late still runs when it was meant to."""
    if when.startswith("+"):
        return f"@{int(time.time() * 1000) + int(when[1:])}"
    return when


def entries(queue, payloads, ids, options):
    """The outbox entries of an enqueue to ``queue`` (a ``Queue``), checked as ``enqueue_many``
    checks it."""
    config = queue.connection.config
    prepared = enqueueing.prepare(config, queue.name, payloads, **options)
    if prepared is None:  # a handler's lock function gave different locks: one preparation each
        parts = [enqueueing.prepare(config, queue.name, [p], **options) for p in payloads]
    else:
        when, opts, items = prepared
        parts = [(when, opts, [item]) for item in items]
    out = []
    for task_id, (when, opts, [(raw, unique, kind)]) in zip(ids, parts, strict=True):
        out.append(Entry(task_id, raw, unique, kind, absolute(when), tuple(opts)))
    return out


_SQL = {}  # (vendor, statement) -> SQL text


def _statement(connection, kind):
    """The outbox's INSERT of one row (``kind`` "insert"; "insert-driver": in the driver's own
    paramstyle), or DELETE of rows by ``task_id`` (``kind`` "delete<n>", n ids), in the
    paramstyle of Django's cursors (``%s``, turned into SQLite's ``?`` by Django)."""
    key = (connection.vendor, kind)
    sql = _SQL.get(key)
    if sql is None:
        # Here, not at the top: ``queues.Queue`` (transactions -> outbox) imports before Django's app
        # registry is ready (from a settings or AppConfig module), and a models module cannot.
        from .models import OutboxTask

        qn = connection.ops.quote_name
        table = qn(OutboxTask._meta.db_table)
        if kind.startswith("insert"):
            columns = ", ".join(qn(OutboxTask._meta.get_field(f).column) for f in _COLUMNS)
            mark = _DRIVER_STYLE[connection.vendor] if kind == "insert-driver" else "%s"
            sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join([mark] * len(_COLUMNS))})"
        else:
            n = int(kind[len("delete") :])
            column = qn(OutboxTask._meta.get_field("task_id").column)
            sql = f"DELETE FROM {table} WHERE {column} IN ({', '.join(['%s'] * n)})"
        _SQL[key] = sql
    return sql


_COLUMNS = ("task_id", "queue", "payload", "spec", "created")
#: The drivers written to directly (vendor -> their parameter mark): sqlite3 and psycopg.
_DRIVER_STYLE = {"sqlite": "?", "postgresql": "%s"}


def store(using, queue_name, items):
    """Write the entries as rows, in the current transaction of ``using`` (if any): one
    parameterised INSERT (the ORM's bulk_create costs more than the statement itself on the
    request's path). On SQLite and PostgreSQL the statement goes to the driver's own cursor
    (Django's cursor cost three times the INSERT: 75 of 100 µs), inside Django's error wrapper
    (errors are Django's ``IntegrityError``... as usual), unless something watches the queries
    (``execute_wrappers``: instrumentation such as Sentry or OpenTelemetry; or the query log of
    ``DEBUG``): then through Django's cursor, so that they see it."""
    connection = connections[using or DEFAULT_DB_ALIAS]
    created = connection.ops.adapt_datetimefield_value(timezone.now())
    rows = [(e.task_id, queue_name, e.payload, e.spec(), created) for e in items]
    if connection.vendor in _DRIVER_STYLE and not connection.execute_wrappers and not connection.queries_logged:
        connection.ensure_connection()
        connection.validate_thread_sharing()
        sql = _statement(connection, "insert-driver")
        with connection.wrap_database_errors:
            cursor = connection.connection.cursor()
            try:
                if len(rows) == 1:
                    cursor.execute(sql, rows[0])
                else:
                    cursor.executemany(sql, rows)
            finally:
                cursor.close()
        return
    sql = _statement(connection, "insert")
    with connection.cursor() as cursor:
        if len(rows) == 1:
            cursor.execute(sql, rows[0])
        else:
            cursor.executemany(sql, rows)


#: After a push failed, for this long (seconds) the fast path does not try again: the rows are
#: left to the relay at once, so a burst of enqueues during an outage does not wait for Redis.
DOWN_FOR = 1.0
_down_until = 0.0


def redis_down():
    """True shortly after a push failed (``DOWN_FOR``): the fast path skips pushing."""
    return time.monotonic() < _down_until


def pushes_failed(queue_name, n, exc):
    """Note a failed push: warn (once per outage) and skip pushing for ``DOWN_FOR`` seconds."""
    global _down_until
    if _down_until == 0.0 or time.monotonic() > _down_until + 10 * DOWN_FOR:
        log.warning(
            "worqr: %d task(s) of queue %s kept in the outbox (the workers' relay pushes them): %s", n, queue_name, exc
        )
    _down_until = time.monotonic() + DOWN_FOR


def push(queue, items, using, background=False, retry_for=None):
    """Push entries of one queue to Redis (retrying for ``PUSH_RETRY_FOR``), then delete their rows. Returns the last
    ``commands.Enqueued``; raises RedisUnavailable (rows kept for the relay). ``background``:
    the rows are deleted by this process's deleter thread, not before returning."""

    enqueued = None
    for group in _groups(items):
        when, opts = group[0].when, list(group[0].options)
        batch = enqueueing.Prepared(when, opts, [(e.payload, e.unique, e.kind) for e in group])
        # create: a task in the outbox was accepted (its transaction committed): it is pushed
        # even if its queue is new and MAX_QUEUES queues exist, never dropped.
        enqueued = enqueueing.enqueue_prepared(
            queue.connection,
            queue.name,
            batch,
            [e.task_id for e in group],
            retry_for=PUSH_RETRY_FOR if retry_for is None else retry_for,
            create=True,
        )
    ids = [e.task_id for e in items]
    if background:
        _deleter.add(using or DEFAULT_DB_ALIAS, ids)
    else:
        delete(using or DEFAULT_DB_ALIAS, ids, retry_for=RELAY_DELETE_RETRY_FOR)
    return enqueued


def delete(using, ids, retry_for=0.0):
    """Delete the rows of pushed tasks; True when done. A failure only leaves them to the relay (a
    no-op push): a locked SQLite database is tried again for ``retry_for`` seconds, quietly."""
    deadline = time.monotonic() + retry_for
    backoff = Backoff(0.05, 1.0)
    while True:
        try:
            _delete(connections[using], ids)
            return True
        except DatabaseError as exc:
            if _locked(exc):
                log.debug("worqr: outbox delete (%s) waits for a locked database: %s", using, exc)
                if backoff.sleep(deadline):
                    continue
            log.warning("worqr: %d task(s) pushed but still in the outbox (%s): %s", len(ids), using, exc)
            return False


def _locked(exc):
    """A SQLite write lock held too long by another connection (the busy timeout ran out)."""
    return "database is locked" in str(exc) or "database table is locked" in str(exc)


#: Ids per DELETE statement (SQLite allows 32,766 parameters, PostgreSQL 65,535).
DELETE_CHUNK = 500


def _delete(connection, ids):
    with transaction.atomic(using=connection.alias):
        with connection.cursor() as cur:
            if connection.vendor == "postgresql":
                # Losing this delete in a crash costs a no-op push: no need to wait for the WAL.
                cur.execute("SET LOCAL synchronous_commit TO OFF")
            for start in range(0, len(ids), DELETE_CHUNK):
                chunk = ids[start : start + DELETE_CHUNK]
                cur.execute(_statement(connection, f"delete{len(chunk)}"), chunk)


#: How long (seconds) the deleter gathers pushed rows before deleting them in one transaction:
#: two write transactions a second at most per process, whatever the rate of enqueues (under
#: the relay's ``RELAY_MIN_AGE``, so the relay seldom pushes a row again).
COALESCE = 0.5
#: How long (seconds) the deleter keeps trying a delete refused by a locked SQLite database
#: before leaving the rows to the relay (which then pushes them again: a no-op).
DELETE_RETRY_FOR = 30.0
#: The deleter closes its database connections after this long (seconds) without work.
IDLE_CLOSE = 1.0


class _Deleter:
    """Deletes the rows the fast path pushed, on a thread of its own, many at a time: the request
    whose commit pushed them does not wait for a second write transaction (an fsync on SQLite).
    Rows it had no time to delete (the process ended) are pushed again by the relay: a no-op.

    ``add`` appends to a list, waking the thread only when a batch begins or is full, so a
    producer seldom pays for a thread switch."""

    def __init__(self):
        self._pending = []  # (alias, ids)
        self._count = 0  # ids in _pending
        self._cond = threading.Condition()
        self._thread = None
        self._busy = False
        self._flushing = 0

    def add(self, using, ids):
        with self._cond:
            self._pending.append((using, ids))
            self._count += len(ids)
            if self._thread is None or not self._thread.is_alive():  # none yet, ended, or a fork
                self._thread = threading.Thread(target=self._run, name="worqr-outbox-deleter", daemon=True)
                self._thread.start()
            elif len(self._pending) == 1 or self._count >= DELETE_CHUNK:  # a batch begins, or is full
                self._cond.notify()

    def flush(self, timeout=10.0):
        """Wait until every row handed over so far is deleted; True if it was in time."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._pending or self._busy:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(min(left, 0.05))
            finally:
                self._flushing -= 1
        return True

    def _run(self):
        last, connected = time.monotonic(), False  # end of the last batch; a connection held
        try:
            while True:
                with self._cond:
                    while not self._pending:
                        self._cond.wait(IDLE_CLOSE)
                        idle = time.monotonic() - last
                        if self._pending:
                            break
                        if connected and idle >= IDLE_CLOSE:  # hold no connection while idle (a test
                            connections.close_all()  # database can then be dropped)
                            connected = False
                        if idle > 30.0:
                            self._thread = None
                            return
                    self._busy = True
                    gather_until = time.monotonic() + COALESCE  # one delete for many pushes
                    while self._count < DELETE_CHUNK and not self._flushing:
                        left = gather_until - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                    batch, self._pending, self._count = self._pending, [], 0
                by_alias = {}
                for alias, ids in batch:
                    by_alias.setdefault(alias, []).extend(ids)
                for alias, ids in by_alias.items():
                    connected = True
                    try:
                        delete(alias, ids, retry_for=DELETE_RETRY_FOR)
                    except Exception as exc:  # never let the thread die: the relay re-pushes (a no-op)
                        log.warning("worqr: %d pushed task(s) left in the outbox (%s): %s", len(ids), alias, exc)
                last = time.monotonic()
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        finally:
            connections.close_all()


_deleter = _Deleter()


def flush(timeout=10.0):
    """Wait until the rows pushed so far by this process's fast path are deleted."""
    return _deleter.flush(timeout)


def _groups(items):
    """Consecutive entries with the same due time and options (one script call each)."""
    out = []
    for e in items:
        if out and (out[-1][0].when, out[-1][0].options) == (e.when, e.options):
            out[-1].append(e)
        else:
            out.append([e])
    return out


def relay_once(using="default", min_age=RELAY_MIN_AGE, limit=RELAY_BATCH):
    """Push up to ``limit`` rows older than ``min_age`` seconds, oldest first; returns how many.
    Raises RedisUnavailable (or a network error) when Redis cannot be reached."""
    from .models import OutboxTask  # see _statement

    cutoff = timezone.now() - timedelta(seconds=min_age)
    rows = list(OutboxTask.objects.using(using).filter(created__lte=cutoff).order_by("seq")[:limit])
    by_queue = {}
    for row in rows:
        by_queue.setdefault(row.queue, []).append(Entry.from_row(row))
    for name, items in by_queue.items():
        push(Queue(name), items, using, retry_for=0.1)  # the engine's Queue; the relay comes back soon anyway
    return len(rows)


def stats(using="default"):
    """(rows in the outbox, age of the oldest in seconds or None); (None, None) when the table
    cannot be read (not migrated yet, database down)."""
    from .models import OutboxTask  # see _statement

    try:
        rows = OutboxTask.objects.using(using)
        count = rows.count()
        oldest = rows.order_by("seq").values_list("created", flat=True).first() if count else None
    except DatabaseError:
        return None, None
    age = max(0.0, (timezone.now() - oldest).total_seconds()) if oldest is not None else None
    return count, age


def summary():
    """The outbox over every database the relay watches: {"size": rows, "oldest_age": seconds
    or None, "unreadable": aliases whose table could not be read} (dashboard and /metrics)."""
    size, oldest, unreadable = 0, None, []
    for alias in databases():
        count, age = stats(alias)
        if count is None:
            unreadable.append(alias)
            continue
        size += count
        if age is not None and (oldest is None or age > oldest):
            oldest = age
    return {"size": size, "oldest_age": oldest, "unreadable": unreadable}


def databases():
    """The database aliases the relay watches: ``WORQR["OUTBOX_DATABASES"]``, by default every
    configured one. Raises ImproperlyConfigured for an unknown alias."""
    aliases = setting("OUTBOX_DATABASES", None)
    if aliases is None:
        return list(settings.DATABASES)
    if isinstance(aliases, str) or not all(a in settings.DATABASES for a in aliases):
        raise ImproperlyConfigured(f"WORQR['OUTBOX_DATABASES'] must be a list of aliases of DATABASES, not {aliases!r}")
    return list(aliases)


class Relay:
    """The worker's relay: a daemon thread pushing rows left in the outbox (``relay_once``) of
    every database, every ``RELAY_INTERVAL`` seconds, until ``stop``."""

    def __init__(self, interval=RELAY_INTERVAL, min_age=RELAY_MIN_AGE):
        self.interval, self.min_age = interval, min_age
        self._stop = threading.Event()
        self._thread = None
        self._complained = set()

    def start(self):
        self._thread = threading.Thread(target=self._run, name="worqr-outbox-relay", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout=5.0):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self):
        backoff = Backoff(RESTART_AFTER, RESTART_MAX)
        try:
            while not self._stop.is_set():
                busy = False
                try:
                    for alias in databases():
                        busy = self._round(alias) or busy
                except Exception:  # never let the thread die: say so, then look again later
                    delay = backoff.next()
                    log.exception("worqr outbox relay: failed; trying again in %.1f s", delay)
                    connections.close_all()
                    self._stop.wait(delay)
                    continue
                backoff.reset()
                if not busy:  # Redis down: look again sooner, to push within ~1 s of its return
                    self._stop.wait(self.interval / 2 if self._complained else self.interval)
        finally:
            connections.close_all()

    def _round(self, alias):
        """One round on one database; True when a full batch was pushed (more may be waiting)."""
        try:
            connections[alias].close_if_unusable_or_obsolete()
            faults.raise_once("relay-raise")
            pushed = relay_once(alias, self.min_age)
        except (RedisUnavailable, *NETWORK_ERRORS) as exc:
            self._complain(alias, "Redis unreachable, rows kept: %s", exc)
            return False
        except (DatabaseError, WorqrError) as exc:
            self._complain(alias, "cannot relay: %s", exc)
            try:
                connections[alias].close()
            except DatabaseError:
                pass
            return False
        if alias in self._complained:
            self._complained.discard(alias)
            log.info("worqr outbox relay (%s): working again", alias)
        if pushed:
            log.info("worqr outbox relay (%s): pushed %d task(s) left in the outbox", alias, pushed)
        return pushed >= RELAY_BATCH

    def _complain(self, alias, message, exc):
        if alias not in self._complained:  # once per outage, not twice a second
            self._complained.add(alias)
            log.warning("worqr outbox relay (%s): " + message, alias, exc)
