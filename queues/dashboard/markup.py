"""The dashboard's markup helpers, shared by its template tags (``templatetags.worqr``) and the
rows it writes in Python (``rows``): fast URLs and one-button forms.

``url_builder(name)`` builds ``{% url 'queues:<name>' arg %}`` for the dashboard's URLs that
take one argument, at a fraction of the cost: the live sections render a link or a form per
row of tables of up to 100 rows several times a second, and ``reverse`` was a third of that
time. The URL is ``reverse``'s for a marker, split around it once per URL name, script prefix
and URLconf, with the argument quoted the way ``reverse`` quotes it (an argument ``reverse``
would refuse, empty or holding a slash, goes through ``reverse`` itself, which raises).
"""

from urllib.parse import quote

from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.html import format_html

_MARK = "wqmark7f3a"
#: What ``reverse`` leaves unquoted in a path (RFC 3986 sub-delimiters and "/~:@").
_SAFE = "!$&'()*+,;=/~:@"
_parts = {}


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


def action_form(context, url, label, cls="", confirm=""):
    """A one-button POST form to ``url`` (with the CSRF token and the page to come back to, when
    the context has them: inside a page, not in a live section). ``confirm``: the question the
    page's script asks first (without the script, the server asks it on a page of its own)."""
    token = context.get("csrf_token")
    csrf = (
        format_html('<input type="hidden" name="csrfmiddlewaretoken" value="{}">', token)
        if token and token != "NOTPROVIDED"
        else ""
    )
    page_path = context.get("page_path")
    back = format_html('<input type="hidden" name="next" value="{}">', page_path) if page_path else ""
    ask = format_html(' data-confirm="{}"', confirm) if confirm else ""
    return format_html(
        '<form method="post" action="{}" class="wq-action"{}>{}{}<button type="submit" class="button {}" '
        'data-action="{}">{}</button></form>',
        url,
        ask,
        csrf,
        back,
        cls,
        str(label).lower(),
        label,
    )
