"""The rows of the queue page's busiest tables (in process, pending, delayed), written in Python.

Under load the live socket re-renders these tables several times a second with every row new
(at 5,000 tasks/s the 50 pending rows and 64 in process are all different tasks 0.1 s later),
and a Django template loop cost 0.1–0.2 ms a row: 18 ms of a 27 ms refresh. These functions
make the same markup (a test renders both and compares) for a quarter of that. They are used
by the section templates through the ``wq_rows`` tag, so the page and the live updates share
this one renderer. Every value goes through ``escape`` (payloads are anyone's text).
"""

from html import escape

from django.conf import settings
from django.template.defaultfilters import floatformat
from django.utils.formats import localize

from .markup import action_form, url_builder

_DASH = '<span class="wq-empty">–</span>'


def _text(value):
    """A value as the template engine shows it: localized, escaped (None shows "None")."""
    if type(value) is int and not settings.USE_THOUSAND_SEPARATOR:
        return str(value)  # what localize() gives, without its cost
    if not isinstance(value, str):
        value = localize(value)
    return escape(str(value))


class _Urls:
    """The row's links, built by ``url_builder`` (once per table, not once per row)."""

    def __init__(self):
        self.task, self.cancel, self.worker = (url_builder(n) for n in ("task", "task-cancel", "worker"))
        self.run_now = url_builder("task-run-now")

    def link(self, task_id):
        return f'<a class="wq-id" href="{escape(self.task(task_id))}">{escape(task_id)}</a>'


def _worker(urls, worker):
    """The worker's link; none when the row has no worker (a task ended between the reads of
    its id and of its hash): a link to nowhere would fail the whole refresh."""
    if not worker:
        return ""
    return f'<a href="{escape(urls.worker(worker))}">{escape(worker)}</a>'


def progress(t):
    """The progress bar cell of an in-process task (also the worker page's, ``wq_progress``)."""
    if t.get("progress") is None:
        return _DASH
    pct = t["progress_pct"]
    label = f"Progress of {t['id']}"
    message = t.get("progress_message")
    extra = f' <span class="wq-progmsg">{escape(message)}</span>' if message else ""
    return (
        f'<span class="wq-prog"><progress class="wq-progress" max="100" value="{_text(pct)}" '
        f'aria-label="{escape(label)}" data-progress="{_text(pct)}">{_text(pct)} %</progress> '
        f'<span class="num">{escape(str(floatformat(pct, 0)))} %</span>{extra}</span>'
    )


def _cancel(context, urls, t):
    if "cancel_task" not in context.get("dashboard_actions", ()):
        return ""
    return action_form(context, urls.cancel(t["id"]), "Cancel", "")


def active(context, tasks):
    out, urls = [], _Urls()
    for t in tasks:
        button = '<span class="wq-badge">cancelling</span>' if t["cancelling"] else _cancel(context, urls, t)
        out.append(
            f'\n  <tr data-id="{escape(t["id"])}"><td>{urls.link(t["id"])}</td><td class="wq-worker">'
            f"{_worker(urls, t['worker'])}</td>"
            f"<td>{_text(t['started'])}</td>\n"
            f'    <td class="num" data-since="{_text(t["started_ms"])}"></td><td>{progress(t)}</td>'
            f'<td class="num">{_text(t["attempt"])}</td><td class="wq-payload">{_text(t["payload"])}</td>\n'
            f"    <td>{button}</td></tr>\n"
        )
    return "".join(out) or '<tr><td colspan="8" class="wq-empty">Nothing in process.</td></tr>'


def pending(context, tasks, offset):
    out, urls = [], _Urls()
    for i, t in enumerate(tasks, 1):
        out.append(
            f'\n  <tr data-id="{escape(t["id"])}"><td class="num">{_text(i + offset)}</td>'
            f"<td>{urls.link(t['id'])}</td><td>{_text(t['created'])}</td>\n"
            f'    <td class="num">{_text(t["attempt"])}</td><td class="wq-payload">{_text(t["payload"])}</td>\n'
            f"    <td>{_cancel(context, urls, t)}</td></tr>\n"
        )
    return "".join(out) or '<tr><td colspan="6" class="wq-empty">No pending task.</td></tr>'


def _run_now(context, urls, t):
    if "retry_task" not in context.get("dashboard_actions", ()):
        return ""
    return action_form(context, urls.run_now(t["id"]), "Run now", "") + " "


def delayed(context, tasks):
    out, urls = [], _Urls()
    for t in tasks:
        out.append(
            f'\n  <tr data-id="{escape(t["id"])}"><td>{urls.link(t["id"])}</td><td>{_text(t["due"])}</td>'
            f'<td class="num" data-until="{_text(t["due_ms"])}"></td>\n'
            f'    <td class="num">{_text(t["attempt"])}</td><td class="wq-payload">{_text(t["payload"])}</td>\n'
            f'    <td class="wq-nowrap">{_run_now(context, urls, t)}{_cancel(context, urls, t)}</td></tr>\n'
        )
    return "".join(out) or '<tr><td colspan="6" class="wq-empty">No delayed task.</td></tr>'
