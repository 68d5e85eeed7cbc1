"""Searches run: a ``Search`` (``_search_syntax``) looked for over the lists where each state's
tasks are (or one tag's index), a bounded number of entries per call, with a cursor to go on."""

from dataclasses import dataclass

from .. import keys
from ..budget import Budget
from ..task import Task
from ._common import decode
from ._ended import ended_from_record
from ._queues import counts_of, known_queues
from ._search_syntax import SEARCH_STATES, make_cursor, parse_cursor, parse_search

#: Where each state's tasks are listed, in the order a search looks: (state, source kind).
_SOURCES = (
    ("active", "active"),
    ("failed", "failed"),
    ("pending", "front"),
    ("pending", "pending"),
    ("delayed", "delayed"),
    ("waiting", "lockwaits"),
    ("blocked", "blocked"),
    ("completed", "hcompleted"),
    ("cancelled", "hcancelled"),
)
#: The sources read from the record of ended tasks (``_ended``), not from task hashes.
_RECORDS = ("hcompleted", "hcancelled")


@dataclass
class SearchPage:
    """One request's worth of a search: the tasks found, where to go on (``cursor``, None when
    everything was looked at), how many entries were looked at, and the total when it is known
    without scanning (a search by tag or by queue and state alone, over at most
    ``TOTAL_QUEUES`` queues; else None); the Redis round trips it took, why it stopped before
    the end or a full page (``budget.ROUND_TRIPS``, ``TIME``, ``GONE``, ``"scan limit"``; None),
    and how many of the queues searched it reached."""

    tasks: list
    cursor: str | None
    scanned: int
    total: int | None = None
    round_trips: int = 0
    stopped: str | None = None
    queues_reached: int = 0
    queues: int = 0


#: Lists whose sizes one round trip asks for (a search skips the empty ones without reading them).
PROBED = 1000
#: A search's total is counted (from each queue's counts) over at most this many queues.
TOTAL_QUEUES = 1000


def _sources(s, queues):
    """(queue, kind, key) of each list a search reads, in order."""
    out = []
    for q in queues:
        if s.tags:  # the index of the first tag: O(results); the other qualifiers filter
            out.append((q, "tag", keys.tag_key(q, s.tags[0])))
            continue
        for state, kind in _SOURCES:
            if not s.states or state in s.states:
                out.append((q, kind, keys.queue_key(q, kind)))
    return out


def _read_source(client, queue, kind, key, offset, count):
    """Up to ``count`` ids from one source from ``offset``; (ids, entries looked at, done)."""
    if kind in ("front", "pending"):
        ids = client.lrange(key, offset, offset + count - 1)
    elif kind in ("failed", "tag", *_RECORDS):
        ids = client.zrevrange(key, offset, offset + count - 1)
    elif kind == "lockwaits":  # one lock's wait list per entry (each list read whole, capped)
        locks = client.zrange(key, offset, offset + count - 1)
        p = client.pipeline(transaction=False)
        for lk in locks:
            p.lrange(keys.lock_wait_key(queue, decode(lk)), 0, 999)
        ids = [i for waiting in p.execute() for i in waiting]
        return ids, len(locks), len(locks) < count
    else:  # active, delayed, blocked: oldest / soonest first
        ids = client.zrange(key, offset, offset + count - 1)
    return ids, len(ids), len(ids) < count


def _read_tasks(client, queue, kind, ids):
    """The tasks (None for those gone) of ``ids`` read from ``kind``'s store, in one round trip:
    the task hashes, or the record of ended tasks."""
    ids = [decode(i) for i in ids]
    if kind in _RECORDS:
        raws = client.hmget(keys.queue_key(queue, "history"), ids) if ids else []
        return [(e.task if e else None) for e in (ended_from_record(i, queue, r) for i, r in zip(ids, raws))]
    p = client.pipeline(transaction=False)
    for tid in ids:
        p.hgetall(keys.task_key(queue, tid))
    return [Task.from_hash(tid, queue, h) for tid, h in zip(ids, p.execute())]


def _sizes(client, sources, start):
    """{index: entries} of the ``PROBED`` sources from ``start``, in one round trip."""
    p = client.pipeline(transaction=False)
    at = range(start, min(start + PROBED, len(sources)))
    for i in at:
        _, kind, key = sources[i]
        p.llen(key) if kind in ("front", "pending") else p.zcard(key)
    return dict(zip(at, p.execute()))


def search_total(client, s, queues):
    """How many tasks match ``s`` when counts alone tell (one tag and nothing else but queues,
    or queues and states alone), over at most ``TOTAL_QUEUES`` queues, in two round trips;
    else None."""
    if len(queues) > TOTAL_QUEUES:
        return None
    p = client.pipeline(transaction=False)
    if s.tag_only:
        for q in queues:
            p.zcard(keys.tag_key(q, s.tags[0]))
        return sum(p.execute())
    if not s.only_sets:
        return None
    for q in queues:
        p.zcard(keys.queue_key(q, "hcompleted"))
        p.zcard(keys.queue_key(q, "hcancelled"))
    kept = p.execute()
    total = 0
    for i, counts in enumerate(counts_of(client, queues)):
        per_state = {
            "pending": counts["runnable"],
            "waiting": counts["waiting"],
            "delayed": counts["delayed"],
            "active": counts["active"],
            "blocked": counts["blocked"],
            "failed": counts["failed"],
            "completed": kept[2 * i],
            "cancelled": kept[2 * i + 1],
        }
        total += sum(per_state[state] for state in (s.states or SEARCH_STATES))
    return total


def search(client, text_or_search, cursor=None, scan_limit=10000, page_size=50, ids_only=False, budget=None):
    """Run a search (a text for ``parse_search``, or a ``Search``) for one request: look at
    at most ``scan_limit`` entries (tasks read in pipelines of at most 500), from ``cursor`` (a
    previous page's), and stop early once ``page_size`` tasks matched, or once ``budget`` (a
    ``budget.Budget``: round trips, time, the client gone) is spent. The lists are looked at in
    order, the empty ones skipped ``PROBED`` at a time. Returns a ``SearchPage`` whose ``cursor``
    goes on where this one stopped ("search further"). ``ids_only``: its ``tasks`` are ids, and a
    search by queue and state (or one tag) alone reads no task."""
    s = parse_search(text_or_search) if isinstance(text_or_search, str) else text_or_search
    budget = budget or Budget(round_trips=10**12, seconds=float("inf"))
    blind = ids_only and (s.only_sets or s.tag_only) and "waiting" not in s.states
    queues = list(dict.fromkeys(s.queues)) if s.queues else known_queues(client)
    budget.spend(0 if s.queues else 1)
    sources = _sources(s, queues)
    index, offset = parse_cursor(cursor, len(sources))
    found, scanned, sizes, stopped = [], 0, {}, None
    while index < len(sources) and len(found) < page_size:
        if scanned >= scan_limit:
            stopped = "scan limit"
            break
        stopped = budget.spent()
        if stopped:
            break
        if index not in sizes:
            sizes = _sizes(client, sources, index)
            budget.spend()
        if offset >= sizes[index]:  # empty (or read to its end): no need to read it
            index, offset = index + 1, 0
            continue
        queue, kind, key = sources[index]
        budget.spend(2 if kind == "lockwaits" else 1)
        ids, looked, done = _read_source(client, queue, kind, key, offset, min(500, scan_limit - scanned))
        if blind and kind != "lockwaits":  # every entry matches: no task to read
            ids = [decode(i) for i in ids[: page_size - len(found)]]
            found += ids
            if len(ids) < looked:
                looked, done = len(ids), False
            scanned += looked
            offset += looked
            if done:
                index, offset = index + 1, 0
            continue
        budget.spend(1 if ids else 0)
        for i, t in enumerate(_read_tasks(client, queue, kind, ids)):
            if t is not None and s.matches(t):
                found.append(t.id if ids_only else t)
                if len(found) >= page_size and kind != "lockwaits" and i + 1 < len(ids):
                    looked, done = i + 1, False  # stop right after it: the cursor goes on from there
                    break
        scanned += looked
        offset += looked
        if done:
            index, offset = index + 1, 0
    total = None
    if not cursor and not budget.spent() and (s.tag_only or s.only_sets):
        total = search_total(client, s, queues)
        budget.spend(0 if total is None else 1 if s.tag_only else 2)
    next_cursor = make_cursor(index, offset) if index < len(sources) else None
    reached = len({q for q, _, _ in sources[: index + 1]}) if sources else 0
    return SearchPage(found, next_cursor, scanned, total, budget.used, stopped, min(reached, len(queues)), len(queues))
