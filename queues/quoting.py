"""How user input is quoted in error messages: as given, between double quotes, shortened when
long. The output (an HTML page, a JSON body) escapes it once; never Python's ``repr``, which
would escape it a second time (``a\\b`` for ``a\b``)."""

SHOWN_MAX = 80
QUEUE_NAME_RULE = "1 to 200 letters, digits and . _ - @ +, starting with a letter or digit"
TASK_ID_RULE = "task ids look like <queue>-<16 hex digits>"


def shown(text, limit=SHOWN_MAX):
    """``text`` (a str) quoted for a message, cut to ``limit`` characters."""
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f'"{text}"'
