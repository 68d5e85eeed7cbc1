"""Template tags and filters of the dashboard.

``{{ t.id|wq_url:"task" }}`` is ``{% url 'queues:task' t.id %}`` for the dashboard's URLs that
take one argument, at a fraction of the cost (``dashboard.markup.url_builder``); the busiest
tables' rows are written in Python (``dashboard.rows``), with the same markup.
"""

from urllib.parse import urlencode

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from ..dashboard import rows, sections
from ..dashboard.markup import action_form, url_builder

register = template.Library()


@register.filter
def wq_url(value, name):
    return url_builder(name)(value)


@register.simple_tag
def wq_tasklink(task_id):
    """The link to a task's page, its id as the text (a tag, not an include:
    an include per row cost more than the row)."""
    return format_html('<a class="wq-id" href="{}">{}</a>', wq_url(task_id, "task"), task_id)


@register.simple_tag(takes_context=True)
def wq_action(context, url, label, cls="", confirm=""):
    """A one-button POST form to ``url`` (with the CSRF token and the page to come back to, when
    the context has them: inside a page, not in a live section); ``confirm``: asked first."""
    return action_form(context, url, label, cls, confirm)


@register.simple_tag(takes_context=True)
def wq_rows(context, table, tasks, offset=0):
    """The rows of the "active", "pending" or "delayed" table (``queues.dashboard.rows``:
    the same markup as a template loop, at a quarter of the cost)."""
    if table == "pending":
        return mark_safe(rows.pending(context, tasks, offset))
    return mark_safe({"active": rows.active, "delayed": rows.delayed}[table](context, tasks))


@register.simple_tag
def wq_progress(task):
    """An in-process task's progress bar (or a dash when it reported none)."""
    return mark_safe(rows.progress(task))


@register.simple_tag
def wq_more(shown, total, what, href=None, search=None):
    """Under a list cut short: "N more <what>: see them", linking to ``href`` or to the search
    for ``search``; nothing when all ``total`` are shown."""
    more = (total or 0) - shown
    if more <= 0:
        return ""
    if href is None:
        href = reverse("queues:search") + "?" + urlencode({"q": search})
    return format_html('<p class="wq-more">{} more {} not shown here: <a href="{}">see them</a></p>', more, what, href)


@register.simple_tag
def wq_queue_tabs(snap):
    """The queue page's tabs with their counts (``sections.queue_tabs``)."""
    return sections.queue_tabs(snap)
