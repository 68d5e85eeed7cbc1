"""Search (the box on every page) and bulk actions on what it finds.

``GET search/?q=...&cursor=...``: one bounded step of the search (``readmodel.search``, at most
``WORQR["SEARCH_SCAN_LIMIT"]`` entries looked at, ``SEARCH_ROUND_TRIPS`` Redis round trips and
``SEARCH_SECONDS``; it stops when the client leaves), its tasks with checkboxes, why it stopped
where it did, and "Search further" (the next cursor) while there is more to look at. A task id
alone goes to its page. A process runs ``SEARCHES_AT_ONCE`` searches at once.

``POST search/bulk/``: ``action`` (cancel, retry, delete, again: run again), ``confirm=yes``, and either ``ids``
(the boxes ticked) or ``all=1`` with ``q`` (every task the search finds). The permissions of the
single actions, and for "all matching" the queue-wide action's too (``bulk.rights``);
CSRF-checked; answered with the job's page (or JSON ``{ok, job, url}``). A process runs
``bulk.JOBS_AT_ONCE`` jobs at once and ``bulk.JOBS_PER_USER`` of one user's: one more is refused
with 429 and why (JSON ``{ok: false, message}`` for the page's script), never queued.
``GET search/bulk/<job>/``: the job's progress (JSON for the page's script).
``POST search/bulk/<job>/stop/``: stop it before its next batch (its owner, or whoever may start
it).
"""

import asyncio
import threading

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect
from django.urls import reverse

from ...conf import search_scan_limit
from ...engine import keys, readmodel
from ...engine.budget import Budget
from ...engine.readmodel import SearchError
from .. import access, bulk, queries
from ..access import post_only, staff_required, wants_json
from .common import BadInput, client, handles_bad_input, render_page

#: Ids a bulk form may name (more: use "all matching").
MAX_IDS = 1000
#: What one step of a search may spend: Redis round trips (each reads up to 500 entries, or the
#: sizes of 1,000 lists) and seconds. Then it stops and says where ("search further").
SEARCH_ROUND_TRIPS, SEARCH_SECONDS = 100, 2.0
#: Searches a server process runs at once: one more waits for its turn up to SEARCH_SECONDS, then
#: is told to try again (503), so that searches never hold every thread of the server.
SEARCHES_AT_ONCE = 2
_turns = threading.BoundedSemaphore(SEARCHES_AT_ONCE)


async def search(request):
    """The search page. Async so that a client that leaves is seen: Django cancels the view, and
    the search is told to stop (its budget's ``stop``) at its next round trip."""
    stop = threading.Event()
    try:
        return await sync_to_async(_search)(request, stop)
    except asyncio.CancelledError:
        stop.set()
        raise


@staff_required
@handles_bad_input
def _search(request, stop):
    text = (request.GET.get("q") or "").strip()
    cursor = request.GET.get("cursor") or None
    if keys.queue_from_task_id(text) is not None:
        return redirect(reverse("queues:task", args=[text]))
    c = client()
    page = budget = None
    if text:
        budget = Budget(SEARCH_ROUND_TRIPS, SEARCH_SECONDS, stop)
        if not _turns.acquire(timeout=SEARCH_SECONDS):
            raise BadInput("The server is running other searches: try again in a moment.", status=503)
        try:
            page = readmodel.search(c, text, cursor=cursor, scan_limit=search_scan_limit(), budget=budget)
        except SearchError as exc:
            raise BadInput(f"Search: {exc}.") from None
        finally:
            _turns.release()
    snapshot = {"view": "search", "now_ms": queries.server_ms(c)}
    return render_page(
        request,
        "queues/search.html",
        {
            "title": "Search",
            "snap": snapshot,
            "q": text,
            "cursor": cursor,
            "results": [queries.task_row(t) for t in page.tasks] if page else [],
            "page": page,
            "scan_limit": search_scan_limit(),
            "budget": {"round_trips": SEARCH_ROUND_TRIPS, "seconds": SEARCH_SECONDS},
            "took": round(budget.elapsed, 2) if budget else None,
            "bulk_actions": [
                a for a in ("retry", "again", "cancel", "delete") if access.can_act(request.user, bulk.PERMISSIONS[a])
            ],
            "bulk_all": [
                a
                for a in ("retry", "again", "cancel", "delete")
                if access.lacking(request.user, bulk.rights(a, True)) is None
            ],
        },
    )


def _refuse(request, status, message):
    if wants_json(request):
        return JsonResponse({"ok": False, "message": message}, status=status)
    raise BadInput(message, status=status)


@post_only
@staff_required
@handles_bad_input
def bulk_start(request):
    action = request.POST.get("action", "")
    if action not in bulk.PERMISSIONS:
        return _refuse(request, 400, f"Unknown bulk action {action[:40]!r}: cancel, retry, again or delete.")
    everything = request.POST.get("all") == "1"
    for codename in bulk.rights(action, everything):
        if not access.can_act(request.user, codename):
            scope = " on all matching tasks, like the queue-wide action," if codename == bulk.QUEUE_WIDE[action] else ""
            return _refuse(request, 403, f"This action{scope} needs the queues.{codename} permission.")
    if request.POST.get("confirm") != "yes":
        return _refuse(request, 400, "Tick the confirmation box to act on these tasks.")
    c = client()
    if everything:
        text = (request.POST.get("q") or "").strip()
        if not text:
            return _refuse(request, 400, "An empty search finds nothing to act on.")
        try:
            readmodel.parse_search(text)
        except SearchError as exc:
            return _refuse(request, 400, f"Search: {exc}.")
        where = {"search": text, "scan_limit": search_scan_limit()}
    else:
        ids = list(dict.fromkeys(request.POST.getlist("ids")))
        if not ids:
            return _refuse(request, 400, "Choose tasks first (tick their boxes), or all matching.")
        if len(ids) > MAX_IDS:
            return _refuse(request, 400, f"At most {MAX_IDS} tasks by id: use all matching for more.")
        bad = [i for i in ids if keys.queue_from_task_id(i) is None]
        if bad:
            return _refuse(request, 400, f"{bad[0][:60]!r} is not a task id.")
        where = {"ids": ids}
    try:
        job = bulk.start(c, request.user, action, **where)
    except bulk.Busy as exc:  # refused at once, nothing started: never queued
        return _refuse(request, 429, str(exc))
    url = reverse("queues:bulk", args=[job])
    if wants_json(request):
        return JsonResponse({"ok": True, "job": job, "url": url, "message": f"Bulk {action} started."}, status=202)
    return redirect(url)


@staff_required
@handles_bad_input
def bulk_status(request, job):
    info = bulk.status(client(), job)
    if info is None:
        if wants_json(request):
            return JsonResponse(
                {"ok": False, "message": "No such bulk action (or it ended over a day ago)."}, status=404
            )
        raise BadInput("No such bulk action (or it ended over a day ago).", status=404)
    if wants_json(request) or request.GET.get("format") == "json":
        return JsonResponse({"ok": True, **info})
    return render_page(
        request,
        "queues/bulk.html",
        {
            "title": f"Bulk {info['action']}",
            "snap": {"view": "bulk"},
            "job": info,
            "verb": bulk.VERBS[info["action"]],
            "may_stop": bulk.may_stop(request.user, info),
        },
    )


@post_only
@staff_required
@handles_bad_input
def bulk_stop(request, job):
    """Stop a running bulk action before its next batch: its owner, or whoever may start it."""
    info = bulk.status(client(), job)
    if info is None:
        return _refuse(request, 404, "No such bulk action (or it ended over a day ago).")
    if not bulk.may_stop(request.user, info):
        needs = ", ".join(f"queues.{c}" for c in bulk.rights(info["action"], bool(info["search"])))
        return _refuse(request, 403, f"Only its owner, or a user with {needs}, may stop this bulk action.")
    url = reverse("queues:bulk", args=[job])
    asked = bulk.request_stop(client(), job, request.user)
    message = "Stopping: no batch starts after this one." if asked else "This bulk action had already ended."
    if wants_json(request):
        return JsonResponse({"ok": True, "message": message})
    messages.add_message(request, messages.INFO, message)
    return redirect(url)
