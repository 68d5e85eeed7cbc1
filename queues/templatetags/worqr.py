"""Template filters of the dashboard.

``{{ t.id|wq_url:"task" }}`` is ``{% url 'queues:task' t.id %}`` for the dashboard's URLs that
take one argument, at a fraction of the cost: the live sections render a link or a form per
row of tables of up to 100 rows several times a second, and ``reverse`` was a third of that
time. The URL is ``reverse``'s for a marker, split around it once per URL name, script prefix
and URLconf, with the argument quoted the way ``reverse`` quotes it (an argument ``reverse``
would refuse, empty or holding a slash, goes through ``reverse`` itself, which raises).
"""

from urllib.parse import quote, urlencode

from django import template
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

register = template.Library()

_MARK = "wqmark7f3a"
#: What ``reverse`` leaves unquoted in a path (RFC 3986 sub-delimiters and "/~:@").
_SAFE = "!$&'()*+,;=/~:@"
_parts = {}


@register.filter
def wq_url(value, name):
    return url_builder(name)(value)


def url_builder(name):
    """``wq_url(·, name)`` as a function of the value, for the current script prefix and
    URLconf (to build many URLs of one name at the cost of string concatenation)."""
    key = (name, get_script_prefix(), get_urlconf())
    if key not in _parts:
        url = reverse(f"queues:{name}", args=[_MARK])
        _parts[key] = tuple(url.split(_MARK)) if url.count(_MARK) == 1 else None
    parts = _parts[key]
    if parts is None:  # a URL the marker does not split: reverse() each time
        return lambda value: reverse(f"queues:{name}", args=[str(value)])
    head, tail = parts

    def build(value):
        value = str(value)
        if not value or "/" in value:
            return reverse(f"queues:{name}", args=[value])
        return head + quote(value, safe=_SAFE) + tail

    return build


@register.simple_tag
def wq_tasklink(task_id):
    """The link to a task's page, its id as the text (a tag, not an include:
    an include per row cost more than the row)."""
    return format_html('<a class="wq-id" href="{}">{}</a>', wq_url(task_id, "task"), task_id)


@register.simple_tag(takes_context=True)
def wq_action(context, url, label, cls=""):
    """A one-button POST form to ``url`` (with the CSRF token and the page to come back to, when
    the context has them: inside a page, not in a live section)."""
    return action_form(context, url, label, cls)


def action_form(context, url, label, cls=""):
    token = context.get("csrf_token")
    csrf = (
        format_html('<input type="hidden" name="csrfmiddlewaretoken" value="{}">', token)
        if token and token != "NOTPROVIDED"
        else ""
    )
    page_path = context.get("page_path")
    back = format_html('<input type="hidden" name="next" value="{}">', page_path) if page_path else ""
    return format_html(
        '<form method="post" action="{}" class="wq-action">{}{}<button type="submit" class="button {}" '
        'data-action="{}">{}</button></form>',
        url,
        csrf,
        back,
        cls,
        str(label).lower(),
        label,
    )


@register.simple_tag(takes_context=True)
def wq_rows(context, table, tasks, offset=0):
    """The rows of the "active", "pending" or "delayed" table (``queues.dashboard.rows``:
    the same markup as a template loop, at a quarter of the cost)."""
    from ..dashboard import rows

    if table == "pending":
        return mark_safe(rows.pending(context, tasks, offset))
    return mark_safe({"active": rows.active, "delayed": rows.delayed}[table](context, tasks))


@register.simple_tag
def wq_progress(task):
    """An in-process task's progress bar (or a dash when it reported none)."""
    from ..dashboard import rows

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
