"""The dashboard's fast URL filter and its row tags give exactly what ``{% url %}`` and the
former includes gave, for every name a queue, task or worker may have."""

import pytest
from django.template import Context, Template
from django.urls import reverse

from queues.templatetags.worqr import wq_action, wq_tasklink, wq_url

NAMES = ["emails", "a.b_c-d", "q+1@host", "ünïcode-ß", "日本語", "x%41y", "sp ace", "semi;colon", "amp&er'sand"]


@pytest.mark.parametrize("value", NAMES)
@pytest.mark.parametrize("name", ["task", "task-cancel", "worker", "queue", "queue-limits", "batch"])
def test_wq_url_is_reverse(name, value):
    """Every dashboard URL built by the filter is the one reverse() builds, quoting included."""
    assert wq_url(value, name) == reverse(f"queues:{name}", args=[value])


def test_wq_url_follows_the_script_prefix():
    """Mounted under a prefix (SCRIPT_NAME), the links carry it as reverse's do."""
    from django.urls import get_script_prefix, set_script_prefix

    before = get_script_prefix()
    try:
        set_script_prefix("/ops/")
        assert wq_url("t1", "task") == reverse("queues:task", args=["t1"]) == "/ops/queues/task/t1/"
    finally:
        set_script_prefix(before)
    assert wq_url("t1", "task") == reverse("queues:task", args=["t1"])


def test_wq_url_refuses_what_reverse_refuses():
    """An empty value or one holding a slash is no URL: reverse's own error, not a wrong link."""
    from django.urls import NoReverseMatch

    for bad in ("", "a/b"):
        with pytest.raises(NoReverseMatch):
            wq_url(bad, "task")


def test_row_tags_escape_and_carry_the_forms_fields():
    """The task link and the action form escape what they show, and a form inside a page carries the CSRF token ..."""
    # ... and the page to come back to (none in a live section).
    link = wq_tasklink('q-"<x>')
    assert "&quot;&lt;x&gt;</a>" in link and "<x>" not in link
    page = Template('{% load worqr %}{% wq_action url "Cancel" "wq-danger" %}').render(
        Context({"url": "/queues/task/t1/cancel/", "csrf_token": 'tok"en', "page_path": "/queues/q/a/?p=1&x=2"})
    )
    assert 'name="csrfmiddlewaretoken" value="tok&quot;en"' in page
    assert 'name="next" value="/queues/q/a/?p=1&amp;x=2"' in page
    assert 'class="button wq-danger" data-action="cancel">Cancel</button>' in page
    live = wq_action(Context({}), "/u/", "Retry")
    assert "csrfmiddlewaretoken" not in live and 'name="next"' not in live and 'action="/u/"' in live
