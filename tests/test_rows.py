"""The in-process, pending and delayed rows written in Python (``queues.dashboard.rows``) are
the markup the template loops they replaced made, escaping included, for every kind of row."""

import pytest
from django.template import Context, Template

#: The loops as they were in the section templates (the reference the Python rows must equal).
PROGRESS = (
    '{% if t.progress is not None %}<span class="wq-prog"><progress class="wq-progress" max="100" '
    'value="{{ t.progress_pct }}" aria-label="Progress of {{ t.id }}" data-progress="{{ t.progress_pct }}">'
    '{{ t.progress_pct }} %</progress> <span class="num">{{ t.progress_pct|floatformat:0 }} %</span>'
    '{% if t.progress_message %} <span class="wq-progmsg">{{ t.progress_message }}</span>{% endif %}'
    '</span>{% else %}<span class="wq-empty">–</span>{% endif %}'
)
CANCEL = '{% if "cancel_task" in dashboard_actions %}{% wq_action t.id|wq_url:"task-cancel" "Cancel" "" %}{% endif %}'
RUN_NOW = (
    '{% if "retry_task" in dashboard_actions %}{% wq_action t.id|wq_url:"task-run-now" "Run now" "" %} {% endif %}'
)
REFERENCE = {
    "active": (
        '{% for t in tasks %}\n  <tr data-id="{{ t.id }}"><td>{% wq_tasklink t.id %}</td><td class="wq-worker">'
        '<a href="{{ t.worker|wq_url:"worker" }}">{{ t.worker }}</a></td><td>{{ t.started }}</td>\n'
        '    <td class="num" data-since="{{ t.started_ms }}"></td><td>{% if t.progress is None %}'
        '<span class="wq-empty">–</span>{% else %}' + PROGRESS + '{% endif %}</td><td class="num">{{ t.attempt }}'
        '</td><td class="wq-payload">{{ t.payload }}</td>\n    <td>{% if t.cancelling %}<span class="wq-badge">'
        'cancelling</span>{% elif "cancel_task" in dashboard_actions %}'
        '{% wq_action t.id|wq_url:"task-cancel" "Cancel" "" %}{% endif %}</td></tr>\n'
        '{% empty %}<tr><td colspan="8" class="wq-empty">Nothing in process.</td></tr>{% endfor %}'
    ),
    "pending": (
        '{% for t in tasks %}\n  <tr data-id="{{ t.id }}"><td class="num">{{ forloop.counter|add:offset }}</td>'
        "<td>{% wq_tasklink t.id %}</td><td>{{ t.created }}</td>\n"
        '    <td class="num">{{ t.attempt }}</td><td class="wq-payload">{{ t.payload }}</td>\n'
        "    <td>" + CANCEL + "</td></tr>\n"
        '{% empty %}<tr><td colspan="6" class="wq-empty">No pending task.</td></tr>{% endfor %}'
    ),
    "delayed": (
        '{% for t in tasks %}\n  <tr data-id="{{ t.id }}"><td>{% wq_tasklink t.id %}</td><td>{{ t.due }}</td>'
        '<td class="num" data-until="{{ t.due_ms }}"></td>\n'
        '    <td class="num">{{ t.attempt }}</td><td class="wq-payload">{{ t.payload }}</td>\n'
        '    <td class="wq-nowrap">' + RUN_NOW + CANCEL + "</td></tr>\n"
        '{% empty %}<tr><td colspan="6" class="wq-empty">No delayed task.</td></tr>{% endfor %}'
    ),
}
NEW = {
    "active": '{% wq_rows "active" tasks %}',
    "pending": '{% wq_rows "pending" tasks offset %}',
    "delayed": '{% wq_rows "delayed" tasks %}',
}


def _row(i, **over):
    row = {
        "id": f"q:{i:08x}",
        "worker": f"host-{i}",
        "payload": f"payload {i}",
        "attempt": 1 + i % 3,
        "created": "2026-11-23 10:00:00",
        "started": "2026-11-23 10:00:01",
        "started_ms": 1795000000000 + i,
        "due": "2026-11-23 11:00:00",
        "due_ms": 1795003600000 + i,
        "cancelling": False,
        "progress": None,
        "progress_pct": None,
        "progress_message": "",
    }
    row.update(over)
    return row


ROWS = [
    _row(1),
    _row(2, payload="<script>alert(\"x\")</script> & 'q'", worker="w<&>\"'", id="q&<b>:1"),
    _row(3, progress=0.4, progress_pct=40.0, progress_message="rendered <40> of 100 & more"),
    _row(4, progress=0.0, progress_pct=0.0),
    _row(5, progress=0.1234, progress_pct=12.3, progress_message=""),
    _row(6, cancelling=True),
    _row(7, started_ms=None, due_ms=None, started="", due="", created=""),
    _row(8, payload="ünïcode 日本語 …", attempt=12345),
]


@pytest.mark.parametrize("table", ["active", "pending", "delayed"])
@pytest.mark.parametrize("actions", [("cancel_task", "retry_task"), ()])
@pytest.mark.parametrize("page", [{}, {"csrf_token": "tok<en>", "page_path": "/queues/q/a/?page=2&x=<1>"}])
@pytest.mark.parametrize("rows", [ROWS, []], ids=["rows", "empty"])
def test_python_rows_equal_the_template_loops(table, actions, page, rows):
    """Same HTML, character for character, with hostile text, progress, cancelling, no actions, an empty table, ..."""
    # ... and the page's CSRF token and return path.
    ctx = {"tasks": rows, "offset": 50, "dashboard_actions": actions, **page}
    want = Template("{% load worqr %}" + REFERENCE[table]).render(Context(ctx))
    got = Template("{% load worqr %}" + NEW[table]).render(Context(ctx))
    assert got == want
    if rows:
        assert "<script>" not in got and "&lt;script&gt;" in got


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_the_worker_pages_progress_cell_is_the_include_it_replaced(row):
    """``wq_progress`` (the worker page's progress cell) is the dash-or-include it replaced."""
    old = '{% if t.progress is None %}<span class="wq-empty">–</span>{% else %}' + PROGRESS + "{% endif %}"
    want = Template("{% load worqr %}" + old).render(Context({"t": row}))
    assert Template("{% load worqr %}{% wq_progress t %}").render(Context({"t": row})) == want


def test_an_in_process_row_without_a_worker_renders_without_its_link():
    """A row read with no worker (its task ended between the reads) shows an empty worker cell instead of ..."""
    # ... failing the whole refresh on a link to nowhere.
    html = Template("{% load worqr %}" + NEW["active"]).render(
        Context({"tasks": [_row(1, worker="")], "dashboard_actions": ()})
    )
    assert '<td class="wq-worker"></td>' in html and 'data-id="q:00000001"' in html
