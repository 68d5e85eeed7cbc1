"""What the dashboard's pages show at most, whatever the data, and the helpers that cut to it.

Every live section stays far below the socket's bound on a message (``live.MAX_MESSAGE_BYTES``)
even when each text it shows is as long as the engine allows and made of characters that HTML
escapes six times over (``"``): lists are paged or cut, texts previewed or cut to their end.
What is left out is counted, with a link to where it is seen ("N more ... see them";
``tests/test_dashboard_bounds.py`` renders every section at its worst).
"""

import math

from ..engine.crypto import Sealed

PER_PAGE = 50
PAYLOAD_PREVIEW = 120
TRACEBACK_MAX = 6000

#: Tasks in process read for the queue page (their locks are shown) and rows shown of them.
ACTIVE_MAX, ACTIVE_SHOWN = 100, 50
#: The failure history's groups shown on the queue page (the most recently seen), failures
#: listed under each, and the characters of the newest one's traceback shown there (its end);
#: the failures page (``failures``) shows every entry with its traceback, page by page.
GROUPS_SHOWN, GROUP_FAILURES_SHOWN, GROUP_TRACEBACK_SHOWN, ERROR_SHOWN = 10, 3, 2000, 300
#: A task page's failures (its newest ones, with the last characters of their tracebacks) and
#: log (the last lines, up to so many characters in all; the whole log is ``task/<id>/log/``).
TASK_FAILURES_SHOWN, TASK_TRACEBACK_SHOWN = 5, 3000
LOG_LINES_SHOWN, LOG_CHARS_SHOWN = 200, 20000
#: Failure history entries per page of the failures page.
FAILURES_PER_PAGE = 20
#: Names shown in a list of queues inside a row (a worker's queues: the others are counted).
NAMES_SHOWN = 5


def page_count(total, per_page=PER_PAGE):
    return max(1, math.ceil(total / per_page))


def preview(text, limit=PAYLOAD_PREVIEW):
    if text is None:
        return ""
    if isinstance(text, Sealed):  # an encrypted queue's payload: never shown as it is stored
        return "encrypted"
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tail(text, limit):
    """The last ``limit`` characters of ``text`` ("…" first when cut)."""
    text = text or ""
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :] if limit > 1 else ""


def paged(items, page, per_page=PER_PAGE):
    """One page of ``items``: {page (brought within 1 and pages), pages, total, first, last (1-based
    positions shown), rows}."""
    total = len(items)
    pages = page_count(total, per_page)
    page = min(max(1, page), pages)
    rows = items[(page - 1) * per_page : page * per_page]
    first = (page - 1) * per_page + 1 if rows else 0
    return {"page": page, "pages": pages, "total": total, "first": first, "last": first + len(rows) - 1, "rows": rows}


def names_shown(names):
    """A list of names as a row shows it: {shown: the first ``NAMES_SHOWN``, more: how many else}."""
    names = list(names)
    return {"shown": names[:NAMES_SHOWN], "more": max(0, len(names) - NAMES_SHOWN)}


def _failure_shown(failure, traceback_limit):
    """A failure as a live section lists it: its error previewed, its traceback's end (or none)."""
    return dict(
        failure, error=preview(failure["error"], ERROR_SHOWN), traceback=tail(failure["traceback"], traceback_limit)
    )


def failure_groups_shown(groups):
    """What the queue page shows of the grouped history: {total: groups, groups: the first
    ``GROUPS_SHOWN``, each with its newest ``GROUP_FAILURES_SHOWN`` failures (the newest one's
    traceback's end only) and how many more it has, more: groups left out}."""
    shown = []
    for g in groups[:GROUPS_SHOWN]:
        listed = [
            _failure_shown(f, GROUP_TRACEBACK_SHOWN if i == 0 else 0)
            for i, f in enumerate(g["failures"][:GROUP_FAILURES_SHOWN])
        ]
        shown.append(dict(g, type=preview(g["type"], 100), failures=listed, more=g["count"] - len(listed)))
    return {"total": len(groups), "groups": shown, "more": max(0, len(groups) - GROUPS_SHOWN)}


def log_shown(lines):
    """What a task page shows of its log: {total: lines, lines: the last ones, at most
    ``LOG_LINES_SHOWN`` and ``LOG_CHARS_SHOWN`` characters in all (a longer last line cut)}."""
    shown, size = [], 0
    for line in reversed(lines[-LOG_LINES_SHOWN:]):
        if size + len(line) > LOG_CHARS_SHOWN:
            if not shown:
                shown.append(tail(line, LOG_CHARS_SHOWN))
            break
        shown.append(line)
        size += len(line)
    return {"total": len(lines), "lines": shown[::-1]}
