"""The failure history grouped by error: failures whose exception type and message *shape* are
the same are counted together, with first and last seen.

The shape of a message is the message with its variable parts replaced: quoted strings by
``'…'``, hex numbers and long hex runs (ids, addresses, hashes) by ``<hex>``, and other numbers
by ``<n>``. So ``KeyError: 'user 12'`` and ``KeyError: 'user 9'`` are one group, and
``Timeout after 3.5 s`` and ``Timeout after 10 s`` are another.
"""

import re

# Order matters: quoted strings first (whatever they hold), then hex, then plain numbers.
_QUOTE = re.compile(r"['\"]")
#: From an opening quote, what a quoted string may hold: any character but that quote, a
#: backslash or a newline, or an escape (a backslash and the next character). Possessive (no
#: backtracking): where it stops, the string closes if the same quote stands there.
_INSIDE = {q: re.compile(rf"{q}(?:[^{q}\\\n]|\\.)*+") for q in "'\""}
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_HEX = re.compile(r"\b0[xX][0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b")
_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SPACES = re.compile(r"\s+")
_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?|$)")

#: How many failures of one group are listed (the group's count covers them all).
GROUP_ITEMS = 20


def split_error(error):
    """``"ValueError: bad 3"`` -> ``("ValueError", "bad 3")``; text without a type -> ``("", text)``."""
    error = (error or "").strip()
    first_line = error.splitlines()[0] if error else ""
    m = _TYPE.match(first_line)
    if m and (m.end() == len(first_line) or first_line[m.end() - 1 : m.end()] in (":", " ")):
        return m.group(1), error[m.end() :].strip()
    return "", error


def message_shape(message):
    """The message with its variable parts normalised (see the module docstring)."""
    shape = _quoted_out(message or "")
    shape = _UUID.sub("<hex>", shape)
    shape = _HEX.sub("<hex>", shape)
    shape = _NUMBER.sub("<n>", shape)
    return _SPACES.sub(" ", shape).strip()[:300]


def _quoted_out(text):
    r"""``text`` with each quoted string (``'…'`` or ``"…"``, on one line, backslash escapes
    allowed) replaced by ``'…'``, in time linear in its length.

    It finds what ``re.sub(r"'(?:[^'\\\n]|\\.)*'|...", ...)`` finds, but that pattern tries every
    quote of an unclosed run again up to the end of the line: quadratic (100 messages of 2,000
    characters of ``\'`` made a queue page take 7.8 s, issue 32). Here a quote left unclosed marks
    how far its string ran: every later quote of the same kind before that point stands escaped
    inside it, so its own string would run to the same point unclosed: it is not tried again."""
    out, kept, at = [], 0, 0
    unclosed_to = {"'": -1, '"': -1}
    while (found := _QUOTE.search(text, at)) is not None:
        start, quote = found.start(), found.group()
        at = start + 1
        if start < unclosed_to[quote]:
            continue
        end = _INSIDE[quote].match(text, start).end()
        if text.startswith(quote, end):
            out += (text[kept:start], "'…'")
            kept = at = end + 1
        else:
            unclosed_to[quote] = end
    out.append(text[kept:])
    return "".join(out)


def group_failures(entries, items=GROUP_ITEMS):
    """Group failure entries (newest first, as ``readmodel.failures`` returns them).

    Returns groups, most recently seen first: ``{"key", "type", "shape", "count", "first_seen",
    "last_seen", "example", "failures"}`` where ``failures`` holds the group's newest ``items``
    entries (None: all) and ``first_seen``/``last_seen`` are the entries' ``failed_at``.
    """
    groups = {}
    for entry in entries:
        etype, message = split_error(entry.get("error"))
        shape = message_shape(message)
        key = f"{etype}: {shape}" if etype else shape
        group = groups.get(key)
        if group is None:
            group = groups[key] = {
                "key": key,
                "type": etype or "(no type)",
                "shape": shape,
                "count": 0,
                "first_seen": entry.get("failed_at"),
                "last_seen": entry.get("failed_at"),
                "example": entry.get("error") or "",
                "failures": [],
            }
        group["count"] += 1
        seen = entry.get("failed_at")
        if seen is not None:
            if group["first_seen"] is None or seen < group["first_seen"]:
                group["first_seen"] = seen
            if group["last_seen"] is None or seen > group["last_seen"]:
                group["last_seen"] = seen
        if items is None or len(group["failures"]) < items:
            group["failures"].append(entry)
    return sorted(groups.values(), key=lambda g: (g["last_seen"] is not None, g["last_seen"]), reverse=True)
