"""A batch's or a workflow's graph drawn on the server as inline SVG: tasks as boxes coloured by
state (the state also written in the box and in its title, so no colour is needed to read it),
``after=`` edges as lines from parent to child, top to bottom.

Bounded: at most ``MAX_NODES`` tasks (the caller says how many more there are: "N more") and
``MAX_EDGES`` edges, whatever it is given. Layout: each task in the layer of its longest chain of
parents among the tasks shown, a layer wrapped at ``PER_ROW`` boxes per row.
"""

from django.utils.html import escape
from django.utils.safestring import mark_safe

from .markup import url_builder

MAX_NODES = 200
MAX_EDGES = 1000
PER_ROW = 8
BOX_W, BOX_H, GAP_X, GAP_Y = 118, 30, 12, 26


def _layers(ids, edges):
    """Layer of each id: 0 for a task with no parent shown, else one more than its deepest parent."""
    parents = {i: [] for i in ids}
    for a, b in edges:
        parents[b].append(a)
    layer = {}
    for start in ids:
        stack = [start]
        while stack:  # iterative depth-first: a long chain can't overflow Python's stack
            node = stack[-1]
            if node in layer:
                stack.pop()
                continue
            todo = [p for p in parents[node] if p not in layer and p not in stack]
            if todo:
                stack.extend(todo)
                continue
            layer[node] = 1 + max((layer[p] for p in parents[node] if p in layer), default=-1)
            stack.pop()
    return layer


def graph_svg(nodes, edges, more=0, url=None, label="Task graph"):
    """The ``<svg>`` of ``nodes`` ([(id, state)], in order) and ``edges`` ([(parent id, child id)],
    those between two nodes shown are drawn); ``more``: tasks left out (a "N more" line);
    ``url(id)``: a task's page, each box links to it."""
    nodes = list(nodes)
    more += max(0, len(nodes) - MAX_NODES)
    nodes = nodes[:MAX_NODES]
    ids = [i for i, _ in nodes]
    shown = set(ids)
    edges = [(a, b) for a, b in edges if a in shown and b in shown and a != b][:MAX_EDGES]
    layer = _layers(ids, edges)
    pos, y_row = {}, 0
    for depth in sorted(set(layer.values())):
        members = [i for i in ids if layer[i] == depth]
        for k, i in enumerate(members):
            row, col = divmod(k, PER_ROW)
            pos[i] = (GAP_X + col * (BOX_W + GAP_X), GAP_Y // 2 + (y_row + row) * (BOX_H + GAP_Y))
        y_row += (len(members) + PER_ROW - 1) // PER_ROW
    width = GAP_X + min(PER_ROW, max(1, len(ids))) * (BOX_W + GAP_X)
    height = y_row * (BOX_H + GAP_Y) + (22 if more else 4)
    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" class="wq-graph" role="img"'
        f' aria-label="{escape(label)}: {len(ids)} tasks{f", {more} more" if more else ""}"'
        ' xmlns="http://www.w3.org/2000/svg">'
    ]
    for a, b in edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        parts.append(
            f'<line x1="{xa + BOX_W / 2:.0f}" y1="{ya + BOX_H}" x2="{xb + BOX_W / 2:.0f}" y2="{yb}"'
            f' class="wq-edge" data-from="{escape(a)}" data-to="{escape(b)}"/>'
        )
    for i, state in nodes:
        x, y = pos[i]
        state = state or "unknown"
        box = (
            f'<g class="wq-node wq-node-{escape(state)}" data-id="{escape(i)}" data-state="{escape(state)}">'
            f"<title>{escape(i)}: {escape(state)}</title>"
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="4"/>'
            f'<text x="{x + 5}" y="{y + 12}">…{escape(i[-8:])}</text>'
            f'<text x="{x + 5}" y="{y + 25}">{escape(state)}</text></g>'
        )
        parts.append(f'<a href="{escape(url(i))}">{box}</a>' if url else box)
    if more:
        parts.append(f'<text x="{GAP_X}" y="{height - 6}" class="wq-label wq-more">{more} more not drawn</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every text in it is escaped above


def of_reading(read, label):
    """The SVG of a ``queries.batch_graph`` / ``workflow_graph`` reading, each box linking to its
    task's page (None when there is no task to draw)."""
    if not read or not read["nodes"]:
        return None
    return graph_svg(read["nodes"], read["edges"], read["more"], url_builder("task"), label)
