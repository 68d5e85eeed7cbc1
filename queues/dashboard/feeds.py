"""What each live view subscribes to, which events concern it, and how it is refreshed.

A feed names the pub/sub channels (or patterns) of what its page shows, filters their raw
messages without decoding them, and builds the page's snapshot (sync: it runs in a thread).
"""

from concurrent.futures import ThreadPoolExecutor

from ..engine import keys
from ..engine.errors import InvalidInput, TaskNotFound
from ..quoting import shown
from . import queries, schedules

#: Snapshots are read from Redis (blocking calls) on these threads, never on the event loop's
#: default executor: a loop that closes (a test's, or a server's on reload) then has no reader
#: thread of ours to wait for.
EXECUTOR = ThreadPoolExecutor(max_workers=4, thread_name_prefix="worqr-dashboard")


class Feed:
    """Base feed: subscribe to ``channels``/``patterns``; every message makes the view dirty."""

    channels = ()
    patterns = ()
    #: Seconds after the last event for one trailing refresh (None: none). Workers report
    #: their processed/failed counts in their heartbeat, which lags the events by up to a beat.
    settle = None
    #: A feed of one page of a list (``self.page``): the part of its snapshot that says which
    #: page it shows (``{"page": n, ...}``; see ``shown_page``).
    paged = None

    def __init__(self, client):
        self.client = client

    @property
    def key(self):
        """What the view shows: feeds with the same key share their snapshots (``shared``)."""
        return (type(self).__name__,)

    def wants(self, data):
        return True

    def snapshot(self):
        raise NotImplementedError


class PagedFeed(Feed):
    """A feed of a page of a list (``?page=``): views of other pages share nothing with it."""

    def __init__(self, client, page=1):
        super().__init__(client)
        self.page = page

    @property
    def key(self):
        return (type(self).__name__, self.page)


class OverviewFeed(PagedFeed):
    patterns = (keys.ALL_QUEUE_EVENTS,)
    settle = 1.5
    paged = "queues"

    def snapshot(self):
        return queries.overview(self.client, self.page)


class WorkersFeed(PagedFeed):
    patterns = (keys.ALL_QUEUE_EVENTS,)
    settle = 1.5
    paged = "workers"

    def snapshot(self):
        return queries.workers_view(self.client, self.page)


class WorkerFeed(Feed):
    """One worker's page: the events of every queue (its queues may change; it may stop)."""

    patterns = (keys.ALL_QUEUE_EVENTS,)
    settle = 1.5

    def __init__(self, client, name):
        super().__init__(client)
        self.name = name

    @property
    def key(self):
        return ("worker", self.name)

    def snapshot(self):
        return queries.worker(self.client, self.name)


class SchedulesFeed(PagedFeed):
    """The Schedules page: schedule changes, and every queue's events (runs enqueued, started,
    finished: the last runs' outcomes)."""

    channels = (keys.SCHEDULE_CHANGES,)
    patterns = (keys.ALL_QUEUE_EVENTS,)
    paged = "schedules"

    def snapshot(self):
        return schedules.snapshot(self.client, self.page)


class QueueFeed(Feed):
    paged = "pending"

    def __init__(self, client, name, page=1):
        super().__init__(client)
        self.name, self.page = name, page
        self.channels = (keys.queue_events_channel(name),)
        self.cache = queries.FailureCache()

    @property
    def key(self):
        return ("queue", self.name, self.page)

    def snapshot(self):
        return queries.queue(self.client, self.name, self.page, cache=self.cache)


class TaskFeed(Feed):
    """One task: only events naming it, or bulk events (more ids than listed, or none). Its
    payload is not live (it never changes): the page shows it, in full if asked."""

    def __init__(self, client, task_id):
        super().__init__(client)
        self.task_id = task_id
        self.channels = (keys.queue_events_channel(keys.queue_from_task_id(task_id)),)
        self._needle = f'"{task_id}"'.encode()

    @property
    def key(self):
        return ("task", self.task_id)

    def wants(self, data):
        return self._needle in data or b'"ids"' not in data or b'"more"' in data

    def snapshot(self):
        return queries.task(self.client, self.task_id)


class BatchesFeed(PagedFeed):
    """The Batches page: every batch's progress (the batches' channel)."""

    channels = (keys.BATCH_EVENTS,)
    paged = "batches"

    def snapshot(self):
        return queries.batches(self.client, self.page)


class BatchFeed(Feed):
    """One batch: its events on the batches' channel, and its queues' events (task states)."""

    channels = (keys.BATCH_EVENTS,)
    paged = "tasks"

    def __init__(self, client, batch_id, page=1):
        super().__init__(client)
        self.batch_id, self.page = batch_id, page
        self._needle = f'"b":"{batch_id}"'.encode()

    @property
    def key(self):
        return ("batch", self.batch_id, self.page)

    def wants(self, data):
        return self._needle in data

    def snapshot(self):
        return queries.batch(self.client, self.batch_id, self.page)


def parse_page(value):
    """A 1-based page number from a query string value; InvalidInput if it is not one."""
    if value in (None, ""):
        return 1
    if not (isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10 and int(value) > 0):
        raise InvalidInput(f"page must be a positive integer below 10**9, not {shown(str(value), 20)}")
    return int(value)


def shown_page(feed):
    """``feed`` on the page its HTTP page shows (and links its socket to): a page past the last
    one shows the last, so every ``?page=`` up to 10**9 is one of the pages there are (one of their
    shared snapshots), not a view of its own. Costs a snapshot, for a page past the first only."""
    if feed.page > 1:
        feed.page = (feed.snapshot().get(feed.paged) or {}).get("page", 1)
    return feed


def feed_for(client, view, arg=None, params=None):
    """The feed of a view: ``overview``, ``workers``, ``schedules``, ``batches``, ``queue`` or
    ``worker`` (arg: name), ``task`` or ``batch`` (arg: id).

    Raises InvalidInput for a malformed name, id or page and TaskNotFound for an unknown queue,
    worker, task or batch (as their HTTP pages answer 404: checked here, when the socket opens;
    a task or batch that goes later stays on its feed, which shows it gone). A page past the last
    is the last (``shown_page``).
    """
    feed = _feed_for(client, view, arg, params or {})
    return shown_page(feed) if feed.paged else feed


def _worker_known(client, name):
    """Whether the worker's HTTP page would show it: online, or gone lately."""
    snapshot = queries.worker(client, name)
    return snapshot["worker"] is not None or snapshot["gone"] is not None


def _feed_for(client, view, arg, params):
    if view == "overview":
        return OverviewFeed(client, parse_page(params.get("page")))
    if view == "workers":
        return WorkersFeed(client, parse_page(params.get("page")))
    if view == "schedules":
        return SchedulesFeed(client, parse_page(params.get("page")))
    if view == "worker":
        name = keys.check_worker_name(arg)
        if not _worker_known(client, name):
            raise TaskNotFound(f"no worker {shown(name)} (online or gone lately)")
        return WorkerFeed(client, name)
    if view == "queue":
        name = keys.check_queue_name(arg)
        if not queries.queue_exists(client, name):
            raise TaskNotFound(f"no queue {shown(name)}")
        return QueueFeed(client, name, parse_page(params.get("page")))
    if view == "batches":
        return BatchesFeed(client, parse_page(params.get("page")))
    if view == "batch":
        if not keys.is_batch_id(arg):
            raise InvalidInput(f"{shown(arg)} is not a batch id")
        page = parse_page(params.get("page"))  # a bad page is a 400 first, as on the batch's page
        if not queries.batch_exists(client, arg):
            raise TaskNotFound(f"no batch {shown(arg)}")
        return BatchFeed(client, arg, page)
    if view == "task":
        if keys.queue_from_task_id(arg) is None:
            raise InvalidInput(f"{shown(arg)} is not a task id")
        if not queries.task_shown(client, arg):
            raise TaskNotFound(f"no task {shown(arg)} (nor its record, failures or end)")
        return TaskFeed(client, arg)
    raise InvalidInput(f"unknown view {shown(view)}")
