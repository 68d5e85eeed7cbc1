"""Goal lines for the benchmarks' summaries: a figure against its bound, PASS or FAIL at a glance.

Each goal is one Markdown table row, ``| goal | measured | bound | verdict |``; a figure the run
did not produce says why ("not measured: ...", "not available: ..."), never a guess.
"""

HEADER = ["| goal | measured | bound | verdict |", "|---|--:|--:|---|"]


def check(goal, value, bound, *, at_most=False, strict=False, fmt="{:,.2f}", unit="", why="", invalid=""):
    """The row for ``value`` against ``bound``: PASS when value >= bound (``at_most``: <=; ``strict``
    makes it > or <). ``value`` None gives "not measured" with ``why``; ``invalid`` (a reason the
    figure does not stand for what the goal asks) gives FAIL with that reason."""
    sign = ("<" if strict else "≤") if at_most else (">" if strict else "≥")
    shown_bound = f"{sign} {fmt.format(bound)}{unit}"
    if value is None:
        return f"| {goal} | - | {shown_bound} | not measured{': ' + why if why else ''} |"
    if at_most:
        ok = value < bound if strict else value <= bound
    else:
        ok = value > bound if strict else value >= bound
    if invalid:
        return f"| {goal} | {fmt.format(value)}{unit} | {shown_bound} | FAIL: {invalid} |"
    return f"| {goal} | {fmt.format(value)}{unit} | {shown_bound} | {'PASS' if ok else 'FAIL'} |"


def absent(goal, bound, why):
    """The row of a goal whose feature does not exist yet (detected, not assumed)."""
    return f"| {goal} | - | {bound} | not available: {why} |"


def info(goal, value, bound, note, *, fmt="{:,.2f}", unit=""):
    """A row shown beside the goals for reference, with no verdict."""
    shown = "-" if value is None else f"{fmt.format(value)}{unit}"
    return f"| {goal} | {shown} | {bound} | ({note}) |"


def ratio(mine, theirs):
    """mine / theirs, or None when either is missing or theirs is 0."""
    return mine / theirs if mine is not None and theirs else None
