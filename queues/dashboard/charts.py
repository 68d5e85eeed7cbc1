"""Line charts drawn on the server as inline SVG (no script, no chart library): the run and wait
time percentiles of a queue over 1 h, 24 h or 7 d, with the deploys marked.

``line_chart`` takes the points (one per bucket, None where nothing ran) and returns the markup,
bounded whatever it is given: at most ``MAX_POINTS`` buckets (the newest) and ``MAX_DEPLOYS``
deploy lines; every text in it (series names, deploy labels) is escaped. Colours come from the
admin theme's CSS variables (``static/queues/dashboard.css``: ``.wq-s-p50``...), so the charts
read in dark mode too; each series also has its own dash pattern, and every bucket a
``<title>`` with its values, so no colour is needed to read them.
"""

from datetime import UTC, datetime

from django.utils.html import escape
from django.utils.safestring import mark_safe

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM = 720, 140, 44, 16
#: The most buckets and deploy lines one chart draws.
MAX_POINTS = 400
MAX_DEPLOYS = 20
#: Deploy labels are cut to this many characters on the chart (the title has them whole).
LABEL_CHARS = 40


def duration_text(seconds):
    """``0.0123`` -> ``'12.3 ms'``; ``75`` -> ``'1.2 min'``; ``None`` -> ``'–'``."""
    if seconds is None:
        return "–"
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 60:
        return f"{seconds:.3g} s"
    if seconds < 3600:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


def _time_text(ms, step_ms):
    fmt = "%m-%d %H:%M" if step_ms >= 3600000 else "%H:%M"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime(fmt)


def _segments(xs, values, y_of):
    """Polyline point lists of the runs of consecutive values that are not None."""
    out, current = [], []
    for x, v in zip(xs, values, strict=True):
        if v is None:
            if current:
                out.append(current)
            current = []
        else:
            current.append(f"{x:.1f},{y_of(v):.1f}")
    if current:
        out.append(current)
    return out


def line_chart(label, series, start_ms, step_ms, deploys=(), fmt=duration_text, counts=None):
    """An ``<svg>`` of ``series`` ([(name, css key, [value or None per bucket])], all as long)
    over buckets of ``step_ms`` from ``start_ms``; ``deploys``: [{label, at (ms)}], those in range
    drawn as a dashed vertical line with their label; ``counts``: per bucket, how many samples
    (in the bucket's title). ``label``: the chart's accessible name."""
    n = max((len(values) for _, _, values in series), default=0)
    cut = max(0, n - MAX_POINTS)
    series = [(name, key, list(values[cut:])) for name, key, values in series]
    counts = list(counts[cut:]) if counts is not None else None
    start_ms += cut * step_ms
    n -= cut
    top = max([v for _, _, values in series for v in values if v is not None], default=0) or 1
    plot_w, plot_h = WIDTH - PAD_LEFT, HEIGHT - PAD_BOTTOM
    step = plot_w / max(1, n)
    xs = [PAD_LEFT + (i + 0.5) * step for i in range(n)]

    def y_of(v):
        return plot_h - v / top * (plot_h - 6)

    parts = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" class="wq-svg wq-linechart" role="img" aria-label="{escape(label)}"'
        ' xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{PAD_LEFT}" y1="{plot_h}" x2="{WIDTH}" y2="{plot_h}" class="wq-axis"/>',
        f'<line x1="{PAD_LEFT}" y1="{plot_h / 2:.1f}" x2="{WIDTH}" y2="{plot_h / 2:.1f}" class="wq-grid"/>',
        f'<text x="0" y="10" class="wq-label">{escape(fmt(top))}</text>',
        f'<text x="0" y="{plot_h / 2 + 4:.1f}" class="wq-label">{escape(fmt(top / 2))}</text>',
    ]
    if n:
        parts.append(f'<text x="{PAD_LEFT}" y="{HEIGHT - 3}" class="wq-label">{_time_text(start_ms, step_ms)}</text>')
        last = _time_text(start_ms + (n - 1) * step_ms, step_ms)
        parts.append(f'<text x="{WIDTH}" y="{HEIGHT - 3}" class="wq-label" text-anchor="end">{last}</text>')
    for name, key, values in series:
        parts.append(
            f'<g class="wq-series wq-s-{escape(key)}" data-series="{escape(key)}"><title>{escape(name)}</title>'
        )
        for points in _segments(xs, values, y_of):
            parts.append(f'<polyline points="{" ".join(points)}"/>')
        parts.extend(f'<circle cx="{x:.1f}" cy="{y_of(v):.1f}" r="3"/>' for x, v in zip(xs, values) if v is not None)
        parts.append("</g>")
    for i in range(n):
        values = [(name, values[i]) for name, _, values in series if values[i] is not None]
        if not values:
            continue
        text = ", ".join(f"{name} {fmt(v)}" for name, v in values)
        if counts is not None:
            text += f" ({counts[i]} tasks)"
        parts.append(
            f'<rect x="{xs[i] - step / 2:.1f}" y="0" width="{step:.1f}" height="{plot_h}" class="wq-hit">'
            f"<title>{_time_text(start_ms + i * step_ms, step_ms)} UTC: {escape(text)}</title></rect>"
        )
    span_ms = n * step_ms
    shown = [d for d in deploys if 0 <= d["at"] - start_ms <= span_ms][-MAX_DEPLOYS:]
    for d in shown:
        x = PAD_LEFT + (d["at"] - start_ms) / max(1, span_ms) * plot_w
        whole = str(d["label"])
        short = whole if len(whole) <= LABEL_CHARS else whole[: LABEL_CHARS - 1] + "…"
        # the label on the side of the line with room for it
        side = ' dx="-3" text-anchor="end"' if x > PAD_LEFT + plot_w / 2 else ' dx="3"'
        parts.append(
            f'<g class="wq-deploy"><title>Deploy {escape(whole)} at {_time_text(d["at"], 60000)} UTC</title>'
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{plot_h}" class="wq-deploy-line"/>'
            f'<text x="{x:.1f}" y="20"{side} class="wq-label wq-deploy-label">{escape(short)}</text></g>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every text in it is escaped above


def rate_text(per_minute):
    """``2.5`` -> ``'2.5/min'``."""
    return "–" if per_minute is None else f"{per_minute:.3g}/min"


def timing_charts(timings, deploys=(), history=None):
    """The run time and the wait time charts of a ``readmodel.timings`` reading, and with
    ``history`` (a ``readmodel.history`` reading of the same span) the completed and failed
    attempts per minute (each bucket's count over its minutes):
    [{title, svg, tasks (counted), unit (what is counted), key, minutes (per point)}]."""
    step_ms = timings["bucket_minutes"] * 60000
    out = []
    for kind, title in (("run", "Run time"), ("wait", "Wait time")):
        s = timings[kind]
        series = [(name, name, s[name]) for name in ("p50", "p95", "p99")]
        label = f"{title} p50, p95 and p99 per {timings['bucket_minutes']} min, last {timings['span']}"
        svg = line_chart(label, series, timings["start_ms"], step_ms, deploys, counts=s["count"])
        minutes = timings["bucket_minutes"]
        out.append(
            {"title": title, "svg": svg, "tasks": sum(s["count"]), "unit": "task", "key": kind, "minutes": minutes}
        )
    if history is not None:
        width = history["bucket_minutes"]
        series = [(kind, kind, [n / width if n else None for n in history[kind]]) for kind in ("completed", "failed")]
        label = f"Completed and failed attempts per minute, per {width} min, last {timings['span']}"
        svg = line_chart(label, series, history["start_ms"], width * 60000, deploys, fmt=rate_text)
        total = sum(history["completed"]) + sum(history["failed"])
        out.append(
            {
                "title": "Completed and failed",
                "svg": svg,
                "tasks": total,
                "unit": "attempt",
                "key": "rate",
                "minutes": width,
            }
        )
    return out
