"""The dashboard's sections: each part of a page that changes is one Django template,
``queues/sections/<name>.html``, rendered from the page's snapshot by the view (inside the
page) and by the live socket (when the snapshot keys it shows change). That template is the
section's only renderer (the rows of the busiest tables come from ``rows.py`` through its
``wq_rows`` tag); the browser swaps in the HTML it is sent.

Every section's template gets ``snap`` (the snapshot), ``dashboard_actions`` (the action
permissions of the user, to show only the buttons that work), ``chart`` (the throughput
chart's bars), ``deploys`` (the deploy lines on it) and, inside a page, ``page_path`` and ``csrf_token`` for forms that work without
the page's script (which otherwise posts them with the CSRF header).
"""

from datetime import UTC, datetime

from django.template.loader import render_to_string

#: view -> section -> the snapshot keys it shows
SECTIONS = {
    "overview": {"totals": ("totals", "workers", "outbox"), "queues": ("queues",), "throughput": ("throughput",)},
    "queue": {
        "state": ("counts",),
        "pause": ("counts",),
        "counts": ("counts",),
        "active": ("active",),
        "pending": ("pending",),
        "delayed": ("delayed",),
        "blocked": ("blocked",),
        "failed": ("failed",),
        "expired": ("expired",),
        "failure_groups": ("failure_groups",),
        "locks": ("locks",),
        "queue_tabs": ("counts", "pending", "failure_groups", "locks"),
        "limits": ("limits",),
        "throughput": ("throughput",),
    },
    "task": {
        "task": ("task", "ended"),
        "progress": ("task",),
        "log": ("log",),
        "failures": ("failures",),
        "relatives": ("parents", "children"),
    },
    "batches": {"batches": ("batches",)},
    "batch": {"batch": ("batch",), "batch_tasks": ("tasks",)},
    "workers": {"workers": ("workers",), "gone": ("gone",)},
    "worker": {"worker": ("worker", "gone"), "worker_tasks": ("tasks",)},
    "schedules": {"schedules": ("schedules",)},
}

CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 720, 160, 28


def chart(throughput):
    """The bars of the throughput chart (completed at the bottom, failed on top), in SVG units."""
    if not throughput:
        return None
    completed, failed = throughput["completed"], throughput["failed"]
    step_ms = throughput.get("bucket_minutes", 1) * 60000
    label_format = "%m-%d %H:%M" if step_ms >= 3600000 else "%H:%M"
    n = len(completed)
    top = max([1] + [c + f for c, f in zip(completed, failed)])
    width = (CHART_WIDTH - CHART_PAD) / n
    scale = (CHART_HEIGHT - 4) / top
    bars = []
    for i, (c, f) in enumerate(zip(completed, failed)):
        x = CHART_PAD + i * width + 1
        minute = datetime.fromtimestamp((throughput["start_ms"] + i * step_ms) / 1000, UTC).strftime(label_format)
        bars.append(
            {
                "x": round(x, 2),
                "w": round(max(1.0, width - 2), 2),
                "hit_w": round(width, 2),
                "ok_y": round(CHART_HEIGHT - c * scale, 2),
                "ok_h": round(c * scale, 2),
                "fail_y": round(CHART_HEIGHT - (c + f) * scale, 2),
                "fail_h": round(f * scale, 2),
                "completed": c,
                "failed": f,
                "minute": minute,
                "label": "end" if i == n - 1 else "start" if i % 15 == 0 and i <= n - 15 else None,
                "label_x": round(x + width - 2 if i == n - 1 else x, 2),
            }
        )
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "box_height": CHART_HEIGHT + 18,
        "pad": CHART_PAD,
        "top": top,
        "bars": bars,
    }


def depth_line(history):
    """The depth chart's polyline points and labels (gaps where no sample was taken), in SVG units."""
    depth = history["depth"]
    n = len(depth)
    top = max([1] + [d for d in depth if d is not None])
    step = (CHART_WIDTH - CHART_PAD) / max(1, n - 1)
    segments, current = [], []
    for i, d in enumerate(depth):
        if d is None:
            if current:
                segments.append(current)
            current = []
            continue
        x = CHART_PAD + i * step
        y = CHART_HEIGHT - d * (CHART_HEIGHT - 4) / top
        current.append(f"{x:.1f},{y:.1f}")
    if current:
        segments.append(current)
    step_ms = history["bucket_minutes"] * 60000
    label_format = "%m-%d %H:%M" if step_ms >= 3600000 else "%H:%M"
    first = datetime.fromtimestamp(history["start_ms"] / 1000, UTC).strftime(label_format)
    last = datetime.fromtimestamp((history["start_ms"] + (n - 1) * step_ms) / 1000, UTC).strftime(label_format)
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "box_height": CHART_HEIGHT + 18,
        "pad": CHART_PAD,
        "top": top,
        "lines": [" ".join(seg) for seg in segments],
        "dots": [dict(zip(("x", "y"), seg[0].split(","))) for seg in segments if len(seg) == 1],
        "first": first,
        "last": last,
        "samples": sum(1 for d in depth if d is not None),
        "latest": next((d for d in reversed(depth) if d is not None), None),
    }


def deploy_marks(history, deploys):
    """Where each deploy's line goes on the history charts (SVG x, over the span's buckets), with
    its label; those outside the span left out."""
    step_ms = history.get("bucket_minutes", 1) * 60000
    n = len(history["completed"])
    span_ms = max(1, n * step_ms)
    out = []
    for d in deploys:
        offset = d["at"] - history["start_ms"]
        if 0 <= offset <= span_ms:
            x = CHART_PAD + offset / span_ms * (CHART_WIDTH - CHART_PAD)
            out.append({"x": round(x, 1), "label": d["label"], "at": datetime.fromtimestamp(d["at"] / 1000, UTC)})
    return out


def context(snapshot, actions, **page):
    """What every section's template is rendered with (``page``: page_path, csrf_token...)."""
    throughput = snapshot.get("throughput")
    marks = deploy_marks(throughput, throughput.get("deploys") or ()) if throughput else []
    return {"snap": snapshot, "dashboard_actions": actions, "chart": chart(throughput), "deploys": marks, **page}


def to_render(view, changed):
    """The sections of ``view`` that show one of the ``changed`` snapshot keys."""
    return [name for name, keys in SECTIONS[view].items() if set(keys) & changed]


def render(snapshot, names, actions, cache=None):
    """``{section: html}`` of the ``names`` sections of the snapshot's view. ``cache``: a dict kept
    with this snapshot (by ``shared``), where sections rendered for the same actions are found."""
    ctx, out, allowed = None, {}, frozenset(actions)
    for name in names:
        html = cache.get((name, allowed)) if cache is not None else None
        if html is None:
            if ctx is None:
                ctx = context(snapshot, actions)
            html = render_to_string(f"queues/sections/{name}.html", ctx)
            if cache is not None:
                cache[(name, allowed)] = html
        out[name] = html
    return out


def render_changed(snapshot, changed, actions, cache=None):
    """``{section: html}`` of the sections showing one of the ``changed`` snapshot keys."""
    return render(snapshot, to_render(snapshot["view"], changed), actions, cache)


#: The queue page's tabs, in order: (name in ``?tab=``, label). Only one shows at a time, so the
#: page fits one screen; "charts" holds the throughput chart and any other chart of the queue.
QUEUE_TABS = (
    ("active", "In process"),
    ("pending", "Pending"),
    ("delayed", "Delayed"),
    ("blocked", "Blocked"),
    ("failed", "Failed"),
    ("expired", "Expired"),
    ("history", "Failure history"),
    ("locks", "Locks"),
    ("limits", "Limits"),
    ("charts", "Charts"),
)
QUEUE_TAB_NAMES = frozenset(name for name, _ in QUEUE_TABS)


def queue_tab_counts(snapshot):
    """{tab: how many things it shows} of the tabs that list things (Limits and Charts: None)."""
    c = snapshot["counts"]
    return {
        "active": c["active"],
        "pending": snapshot["pending"]["total"],
        "delayed": c["delayed"],
        "blocked": c["blocked"],
        "failed": c["failed"],
        "expired": c["expired"],
        "history": (snapshot.get("failure_groups") or {}).get("total", 0),
        "locks": len(snapshot.get("locks") or ()),
        "limits": None,
        "charts": None,
    }


def queue_tabs(snapshot):
    """The tab bar's entries: name, label, count (None: not a list) and whether it is empty."""
    counts = queue_tab_counts(snapshot)
    return [{"name": n, "label": label, "count": counts[n], "empty": counts[n] == 0} for n, label in QUEUE_TABS]


def default_queue_tab(snapshot):
    """The tab a queue's page opens on: the first that has something, else Pending."""
    counts = queue_tab_counts(snapshot)
    return next((n for n, _ in QUEUE_TABS if counts[n]), "pending")
