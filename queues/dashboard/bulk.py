"""Bulk actions from the dashboard: run in a background thread of the server process, in
batches (``engine.bulk``), their progress kept in Redis (``keys.bulk_job_key``) so any process
can show it; one audit row per bulk action, written when it starts and given its count when it
ends.

Rights, the same as on every other path: each action needs its own permission (``PERMISSIONS``);
deleting a task that has not run removes it like a cancel, so a delete by a user without
``cancel_task`` deletes failed and completed tasks only and leaves the others; "all matching"
acts on everything a search finds, like the queue-wide actions, and needs their permission too
(``QUEUE_WIDE``: ``retry_all_failed`` to retry, ``purge_queue`` to cancel or delete).

A job checks again, before each batch (and each page of its search), that its owner still has
every right it needs, read afresh from the database (active, staff, each permission), and that
nobody asked it to stop (``request_stop``, the page's Stop button); if not, it stops there:
phase ``stopped``, with the reason, and what it did so far in the audit row.

A server process runs ``JOBS_AT_ONCE`` bulk jobs at once, and ``JOBS_PER_USER`` of one user's
(``Slot``); ``start`` refuses one more (``Busy``: the page answers 429 with why), never queues it.
A job frees its slot when it ends, however it ends.

Job fields: action, search (the query, or '' for chosen ids), user, user_id, phase (finding,
acting, done, failed, stopped), found, done, total, changed, error, reason (why it stopped),
finished_only, started and ended (Unix ms).
"""

import logging
import os
import threading
import time
from collections import Counter

from django.contrib.auth import get_user_model
from django.db import connection as db_connection

from ..engine import bulk, keys, readmodel
from ..models import AuditLog
from .access import can_act, lacking

log = logging.getLogger("worqr.dashboard")

#: Seconds a finished job's progress stays readable.
KEEP = 86400

PERMISSIONS = {"cancel": "cancel_task", "retry": "retry_task", "delete": "delete_task", "again": "enqueue_task"}
QUEUE_WIDE = {"cancel": "purge_queue", "retry": "retry_all_failed", "delete": "purge_queue", "again": "enqueue_task"}
VERBS = {"cancel": "cancelled", "retry": "queued again", "delete": "deleted", "again": "run again"}
ENDED = ("done", "failed", "stopped")
#: Bulk jobs a server process runs at once, and of one user (as ``SEARCHES_AT_ONCE`` bounds the
#: searches): one more is refused at once (``Busy``), never queued, so that however many are
#: asked for, jobs never hold more threads of the server, or more of Redis, than this.
JOBS_AT_ONCE, JOBS_PER_USER = 2, 1
_turns = threading.BoundedSemaphore(JOBS_AT_ONCE)
_lock = threading.Lock()
_of_user = Counter()  # user pk -> jobs of theirs running in this process


class Stop(Exception):
    """Raised by a job's check between batches: the job stops there (the message says why)."""


class Busy(Exception):
    """Raised by ``start`` when the process, or the user, already runs as many jobs as it may."""


class Slot:
    """One of the process's ``JOBS_AT_ONCE`` turns, and one of the user's ``JOBS_PER_USER``:
    taken at once or not at all (``Busy``); ``release`` frees both, once (it may be called again)."""

    def __init__(self, user_pk):
        with _lock:
            if _of_user[user_pk] >= JOBS_PER_USER:
                raise Busy(
                    "You already have a bulk action running: wait for it to end (or stop it) before starting another."
                )
            if not _turns.acquire(blocking=False):
                raise Busy(
                    f"The server is running {JOBS_AT_ONCE} bulk actions already: try again once one of them has ended."
                )
            _of_user[user_pk] += 1
        self.user_pk = user_pk
        self.held = True

    def release(self):
        with _lock:
            if not self.held:
                return
            self.held = False
            _of_user[self.user_pk] -= 1
            if _of_user[self.user_pk] <= 0:
                del _of_user[self.user_pk]
            _turns.release()


def rights(action, everything):
    """The permissions a bulk ``action`` needs: its own, and for "all matching" (``everything``)
    the queue-wide action's."""
    return [PERMISSIONS[action], *([QUEUE_WIDE[action]] if everything else [])]


def _write(client, job_id, **fields):
    key = keys.bulk_job_key(job_id)
    p = client.pipeline(transaction=False)
    p.hset(key, mapping={k: "" if v is None else v for k, v in fields.items()})
    p.expire(key, KEEP)
    p.execute()


def status(client, job_id):
    """The job's progress as a dict, or None if unknown (or its record expired)."""
    if not (isinstance(job_id, str) and len(job_id) == 16 and all(c in "0123456789abcdef" for c in job_id)):
        return None
    out = readmodel.bulk_job(client, job_id)
    if out is None:
        return None
    for name in ("found", "done", "total", "changed", "started", "ended"):
        out[name] = int(out[name]) if out.get(name) else None
    out["id"] = job_id
    out["finished"] = out.get("phase") in ENDED
    out["finished_only"] = out.get("finished_only") == "1"
    return out


def may_stop(user, job):
    """Who may stop a job: its owner, or whoever may start the same job."""
    if str(user.pk) == job.get("user_id"):
        return True
    return lacking(user, rights(job["action"], bool(job.get("search")))) is None


def request_stop(client, job_id, user):
    """Ask a running job to stop before its next batch; False if it had already ended."""
    job = status(client, job_id)
    if job is None or job["finished"]:
        return False
    _write(client, job_id, stop=user.get_username())
    return True


def start(client, user, action, *, ids=None, search=None, scan_limit=10000):
    """Start ``action`` on ``ids`` or on every task ``search`` finds; returns the job id at once.
    The caller has checked ``rights(action, search is not None)``. Raises ``Busy``, having
    started nothing, when the process or the user already runs as many jobs as it may."""
    if action not in PERMISSIONS:
        raise ValueError(f"unknown bulk action {action!r}")
    slot = Slot(user.pk)
    try:
        return _start(client, user, action, ids, search, scan_limit, slot)
    except BaseException:
        slot.release()  # no thread took it
        raise


def _start(client, user, action, ids, search, scan_limit, slot):
    needed = rights(action, search is not None)
    finished_only = action == "delete" and not can_act(user, "cancel_task")
    if action == "delete" and not finished_only:
        needed.append("cancel_task")  # it removes tasks that have not run: checked again too
    job_id = os.urandom(8).hex()
    now = int(time.time() * 1000)
    _write(
        client,
        job_id,
        action=action,
        search=search or "",
        user=user.get_username(),
        user_id=user.pk,
        phase="finding",
        found=len(ids or ()),
        done=0,
        total=len(ids) if ids is not None else "",
        changed=0,
        finished_only="1" if finished_only else "0",
        started=now,
    )
    what = f"all tasks matching {search!r}" if search is not None else f"{len(ids)} chosen task(s)"
    if finished_only:
        what += " (failed and completed ones only: no queues.cancel_task)"
    entry = AuditLog.objects.create(user=user, action=f"bulk_{action}", detail=f"{what}: started")
    job = Job(client, job_id, user.pk, user.get_username(), needed, slot)
    thread = threading.Thread(
        target=job.run,
        args=(entry.pk, action, ids, search, scan_limit, what, finished_only),
        name=f"worqr-bulk-{job_id}",
        daemon=True,
    )
    thread.start()
    return job_id


class Job:
    """One running bulk action: its checks between batches and its progress."""

    def __init__(self, client, job_id, user_pk, username, needed, slot=None):
        self.client, self.job_id, self.user_pk, self.username, self.needed = client, job_id, user_pk, username, needed
        self.slot = slot
        self.counts = {"done": 0, "total": 0, "changed": 0}
        self.written = 0.0

    def check(self):
        """Before each batch: stop if asked to, or if the owner lost a right the job needs."""
        asked = (readmodel.bulk_job(self.client, self.job_id) or {}).get("stop")
        if asked:
            raise Stop(f"stopped by {asked}")
        owner = get_user_model().objects.filter(pk=self.user_pk).first()  # afresh: no cached permission
        why = lacking(owner, self.needed)
        if why is not None:
            raise Stop(f"stopped: {self.username} {why}")

    def progress(self, phase, done, total, changed):
        if phase == "acting":
            self.counts.update(done=done, total=total, changed=changed)
        now = time.monotonic()
        if now - self.written < 0.2 and (total is None or done < total):
            return  # at most five writes a second
        self.written = now
        if phase == "finding":
            _write(self.client, self.job_id, phase=phase, found=done)
        else:
            _write(self.client, self.job_id, phase=phase, done=done, total=total, changed=changed)

    def run(self, audit_pk, action, ids, search, scan_limit, what, finished_only):
        try:
            self._run(audit_pk, action, ids, search, scan_limit, what, finished_only)
        finally:
            self._release()  # whatever happened: the next job may start

    def _release(self):
        if self.slot is not None:
            self.slot.release()

    def _run(self, audit_pk, action, ids, search, scan_limit, what, finished_only):
        verb = VERBS[action]
        try:
            if ids is None:
                ids = bulk.find_ids(
                    self.client, search, scan_limit=scan_limit, progress=self.progress, check=self.check
                )
            self.counts["total"] = len(ids)
            _write(self.client, self.job_id, phase="acting", found=len(ids), total=len(ids), done=0)
            changed = bulk.apply(
                self.client, action, ids, progress=self.progress, check=self.check, finished_only=finished_only
            )
            detail = f"{what}: {changed} of {len(ids)} {verb}"
            ended = dict(phase="done", done=len(ids), total=len(ids), changed=changed)
        except Stop as exc:
            c = self.counts
            detail = f"{what}: {exc}, after {c['changed']} of {c['total']} {verb}"
            ended = dict(phase="stopped", reason=str(exc), **c)
        except Exception as exc:  # recorded for the page; the audit row says so too
            log.exception("worqr dashboard: bulk %s failed", action)
            detail = f"{what}: failed ({exc})"[:1000]
            ended = dict(phase="failed", error=str(exc)[:500])
        # The audit row gets its count before the job reads as finished, so whoever sees "done"
        # on the page (or in a test) also sees the count in the audit log.
        try:
            AuditLog.objects.filter(pk=audit_pk).update(detail=detail[:1000])
        except Exception:
            log.exception("worqr dashboard: could not record bulk %s in the audit log", action)
        finally:
            db_connection.close()  # this thread's database connection
            # Freed before the job reads as finished: whoever sees it end may start the next one.
            self._release()
            _write(self.client, self.job_id, ended=int(time.time() * 1000), **ended)
