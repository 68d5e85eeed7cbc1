"""The search language, parsed (no Redis here; ``_search`` runs a parsed search):
``queue:emails state:failed error:"SMTP" tag:customer:42 worker:host-1 before:2026-11-20
after:2026-11-19T12:00 free words`` becomes a ``Search``; a bad qualifier value raises
``SearchError``, whose message is for the user. A search's cursor ("search further") is parsed
and made here too."""

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .. import keys
from ..crypto import Sealed

#: The qualifiers a search understands; anything else is free text (over payloads and errors).
SEARCH_QUALIFIERS = ("queue", "state", "error", "tag", "worker", "before", "after")
SEARCH_STATES = ("pending", "delayed", "waiting", "blocked", "active", "failed", "completed", "cancelled")
_TOKEN = re.compile(r'(?:(\w+):)?("(?:[^"\\]|\\.)*"|\S+)')
#: A search cursor: "<source>.<offset>", ASCII digits, the offset far below Redis's 64-bit
#: range arguments (a bigger one made LRANGE fail).
_CURSOR = re.compile(r"([0-9]{1,9})\.([0-9]{1,15})")


class SearchError(ValueError):
    """A malformed search: the message says what is wrong."""


@dataclass
class Search:
    """A parsed search (``parse_search``): each qualifier's values, and the free-text words."""

    queues: list = field(default_factory=list)
    states: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    tags: list = field(default_factory=list)
    workers: list = field(default_factory=list)
    before_ms: int | None = None
    after_ms: int | None = None
    words: list = field(default_factory=list)

    @property
    def only_sets(self):
        """Whether the search needs no task's content (queue and state alone): totals are counts."""
        return not (self.errors or self.tags or self.workers or self.words) and self.before_ms is self.after_ms is None

    @property
    def tag_only(self):
        """Whether the search is one tag and nothing else but queues: the tag index is its answer."""
        return (
            len(self.tags) == 1
            and not (self.states or self.errors or self.workers or self.words)
            and self.before_ms is self.after_ms is None
        )

    def matches(self, t):
        """Whether task ``t`` (read whole) is one the search looks for: every qualifier holds (a
        worker qualifier matches a name or its start) and every word is in its payload or error."""
        if self.states and t.state not in self.states:
            return False
        if self.workers and not any((t.worker or "").startswith(w) for w in self.workers):
            return False
        tags = set(t.tags or ())
        if any(tag not in tags for tag in self.tags):
            return False
        created = int(t.created_at.timestamp() * 1000) if t.created_at else None
        if self.before_ms is not None and (created is None or created >= self.before_ms):
            return False
        if self.after_ms is not None and (created is None or created < self.after_ms):
            return False
        error = (t.error or "").lower()
        if any(e not in error for e in self.errors):
            return False
        if self.words:
            payload = t.payload.decode("utf-8", "replace") if isinstance(t.payload, bytes) else (t.payload or "")
            if isinstance(t.payload, Sealed):  # an encrypted queue's: never matched inside ciphertext
                payload = ""
            text = payload.lower() + "\n" + error
            if any(w not in text for w in self.words):
                return False
        return True


def _when(name, text):
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise SearchError(f"{name}: {text!r} is not a date or time (2026-11-20, or 2026-11-20T14:30)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def parse_search(text):
    """Parse ``queue:emails state:failed error:"SMTP" tag:customer:42 worker:host-1
    before:2026-11-20 after:2026-11-19T12:00 free words`` into a ``Search``; a quoted value may
    hold spaces. Raises SearchError (a message for the user) for a bad queue name, state or date."""
    if not isinstance(text, str) or len(text) > 1000:
        raise SearchError("a search is a text of at most 1,000 characters")
    s = Search()
    for name, raw in _TOKEN.findall(text):
        value = raw[1:-1].replace('\\"', '"') if len(raw) >= 2 and raw[0] == raw[-1] == '"' else raw
        name = name.lower()
        if name and name not in SEARCH_QUALIFIERS:
            value, name = f"{name}:{value}", ""  # "http://..." or "a:b" in a payload: free text
        if not value:
            continue
        if name == "queue":
            try:
                s.queues.append(keys.check_queue_name(value))
            except ValueError:
                raise SearchError(f"queue: {value!r} is not a queue name") from None
        elif name == "state":
            if value not in SEARCH_STATES:
                raise SearchError(f"state: {value!r} is not one of {', '.join(SEARCH_STATES)}")
            s.states.append(value)
        elif name == "error":
            s.errors.append(value.lower())
        elif name == "tag":
            s.tags.append(value)
        elif name == "worker":
            s.workers.append(value)
        elif name == "before":
            s.before_ms = _when("before", value)
        elif name == "after":
            s.after_ms = _when("after", value)
        else:
            s.words.append(value.lower())
    return s


def parse_cursor(cursor, sources):
    """(source, offset) of a search ``cursor`` (None or "": the start) over ``sources`` lists;
    SearchError if it is not one."""
    if cursor in (None, ""):
        return 0, 0
    match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
    if match is None or int(match[1]) > sources:
        raise SearchError(f"{str(cursor)[:40]!r} is not a search cursor")
    return int(match[1]), int(match[2])


def make_cursor(source, offset):
    """The cursor that goes on at ``offset`` of list ``source`` (``parse_cursor`` reads it)."""
    return f"{source}.{offset}"
