"""Bulk actions from the dashboard: run in a background thread of the server process, in
batches (``engine.bulk``), their progress kept in Redis (``keys.bulk_job_key``) so any process
can show it; one audit row per bulk action, written when it starts and given its count when it
ends.

Job fields: action, search (the query, or '' for chosen ids), user, phase (finding, acting,
done, failed), found, done, total, changed, error, started and ended (Unix ms).
"""

import logging
import os
import threading
import time

from ..engine import bulk, keys, readmodel
from ..models import AuditLog

log = logging.getLogger("worqr.dashboard")

#: Seconds a finished job's progress stays readable.
KEEP = 86400

PERMISSIONS = {"cancel": "cancel_task", "retry": "retry_task", "delete": "delete_task"}
VERBS = {"cancel": "cancelled", "retry": "queued again", "delete": "deleted"}


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
    out["finished"] = out.get("phase") in ("done", "failed")
    return out


def start(client, user, action, *, ids=None, search=None, scan_limit=10000):
    """Start ``action`` on ``ids`` or on every task ``search`` finds; returns the job id at once."""
    if action not in PERMISSIONS:
        raise ValueError(f"unknown bulk action {action!r}")
    job_id = os.urandom(8).hex()
    now = int(time.time() * 1000)
    _write(
        client,
        job_id,
        action=action,
        search=search or "",
        user=user.get_username(),
        phase="finding",
        found=len(ids or ()),
        done=0,
        total=len(ids) if ids is not None else "",
        changed=0,
        started=now,
    )
    what = f"all tasks matching {search!r}" if search is not None else f"{len(ids)} chosen task(s)"
    entry = AuditLog.objects.create(user=user, action=f"bulk_{action}", detail=f"{what}: started")
    thread = threading.Thread(
        target=_run,
        args=(client, job_id, entry.pk, action, ids, search, scan_limit, what),
        name=f"worqr-bulk-{job_id}",
        daemon=True,
    )
    thread.start()
    return job_id


def _run(client, job_id, audit_pk, action, ids, search, scan_limit, what):
    last = [0.0]

    def progress(phase, done, total, changed):
        now = time.monotonic()
        if now - last[0] < 0.2 and (total is None or done < total):
            return  # at most five writes a second
        last[0] = now
        if phase == "finding":
            _write(client, job_id, phase=phase, found=done)
        else:
            _write(client, job_id, phase=phase, done=done, total=total, changed=changed)

    ended = None
    try:
        if ids is None:
            ids = bulk.find_ids(client, search, scan_limit=scan_limit, progress=progress)
        _write(client, job_id, phase="acting", found=len(ids), total=len(ids), done=0)
        changed = bulk.apply(client, action, ids, progress=progress)
        detail = f"{what}: {changed} of {len(ids)} {VERBS[action]}"
        ended = dict(phase="done", done=len(ids), total=len(ids), changed=changed)
    except Exception as exc:  # recorded for the page; the audit row says so too
        log.exception("worqr dashboard: bulk %s failed", action)
        detail = f"{what}: failed ({exc})"[:1000]
        ended = dict(phase="failed", error=str(exc)[:500])
    # The audit row gets its count before the job reads as finished, so whoever sees "done"
    # on the page (or in a test) also sees the count in the audit log.
    try:
        AuditLog.objects.filter(pk=audit_pk).update(detail=detail)
    except Exception:
        log.exception("worqr dashboard: could not record bulk %s in the audit log", action)
    finally:
        from django.db import connection

        connection.close()  # this thread's database connection
        _write(client, job_id, ended=int(time.time() * 1000), **ended)
