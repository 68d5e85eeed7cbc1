"""Queue: enqueue tasks and manage them (cancel, retry, delete, pause, drop, purge, read)."""

from collections.abc import Iterable
from typing import Any, Literal, Unpack

from . import commands, enqueueing, keys, readmodel, workflows
from .codes import Code
from .connection import get_default
from .enqueueing import new_task_id
from .errors import ConfigurationError, InvalidInput
from .limits import override_args
from .options import EnqueueOptions, Payload, TaskOptions, check_names
from .task import Task

__all__ = ["Queue", "new_task_id"]

#: Entries per purge, drop or retry call: so that no script call holds Redis for long (under a
#: few ms each, measured with 300,000 tasks).
_BATCH = enqueueing.BATCH


#: set_limits: an option not given (None means "no limit").
_UNSET = object()


class Queue:
    """A named queue. Cheap to create; all state lives in Redis."""

    def __init__(self, name: str, connection: Any = None) -> None:
        self.name = keys.check_queue_name(name)
        self._connection = connection

    def __repr__(self):
        return f"<Queue {self.name}>"

    @property
    def connection(self):
        return self._connection or get_default()

    @property
    def client(self):
        return self.connection.client

    # -- producing -------------------------------------------------------------------------

    def enqueue(self, payload: Payload, **options: Unpack[EnqueueOptions]) -> str:
        """Add one task; returns its id. See ``enqueue_many`` for the options (``options.py``
        names each)."""
        if options or not isinstance(payload, str):
            return self.enqueue_many([payload], **options)[0]
        return enqueueing.enqueue_plain(self.connection, self.name, payload)

    def enqueue_many(
        self,
        payloads: Iterable[Payload],
        *,
        ids: Iterable[str] | None = None,
        after: Iterable[str] | None = None,
        on_parent_failure: Literal["cancel", "run"] = "cancel",
        **options: Unpack[TaskOptions],
    ) -> list[str]:
        """Add tasks, atomically in steps of 500 (``enqueueing.BATCH``); returns their ids in order.

        Options: ``delay`` (seconds) or ``eta`` (a datetime) defers them; ``retries``,
        ``timeout`` (s) and ``backoff`` (s) override the handler's defaults; ``lock`` names a lock
        they take while running; ``unique=True`` derives a unique key from each payload (or pass
        the key as a string): while a task with that key is pending or running, enqueueing
        returns its id; ``callback`` (a URL) and ``meta`` (text) are kept with the task.
        ``ids`` gives the tasks' ids (made with ``new_task_id``) instead of fresh ones; an id
        already enqueued (even if its task has finished since, within ``ENQUEUE_DEDUP_FOR``) is
        then not enqueued again.

        Enqueue is idempotent by id: a call whose reply was lost is sent again and adds nothing
        (its tasks be pending, running or ended since). Redis unreachable: retried for
        ``WORQR["ENQUEUE_RETRY_FOR"]`` seconds (2 by default), then ``RedisUnavailable`` is
        raised, within ``ENQUEUE_RETRY_FOR`` + ``ENQUEUE_SOCKET_TIMEOUT``; it lists the ids
        added, those that may have been (no reply came) and those not added (``sending``).

        ``after`` (task ids, of any queues, at most 1,000) makes the tasks ``blocked`` until every
        one of those parents has completed; if a parent ends otherwise (failed for good,
        cancelled, deleted) they are cancelled (``on_parent_failure="cancel"``, the default) or
        run anyway (``"run"``). See ``workflows``.
        """
        check_names(options)  # a misspelt option: InvalidTask naming it, nothing written
        connection = self.connection
        out = enqueueing.enqueue_many(
            connection, self.name, payloads, options, ids=ids, after=after, on_parent_failure=on_parent_failure
        )
        if after:  # tasks cancelled at once (a parent had failed): their batch is told
            workflows.tell_at_once(connection.enqueue_client, self.name)
        return out

    def validate(
        self,
        payloads: Iterable[Payload],
        *,
        after: Iterable[str] | None = None,
        on_parent_failure: Literal["cancel", "run"] = "cancel",
        **options: Unpack[TaskOptions],
    ) -> None:
        """Raise what ``enqueue_many`` would raise for these payloads and options; adds nothing."""
        check_names(options)
        enqueueing.validate(
            self.connection, self.name, payloads, options, after=after, on_parent_failure=on_parent_failure
        )

    # -- reading ---------------------------------------------------------------------------

    def _check_id(self, task_id):
        if keys.queue_from_task_id(task_id) != self.name:
            raise InvalidInput(f"{task_id!r} is not a task id of queue {self.name!r}")
        return task_id

    def get(self, task_id: str) -> Task | None:
        """The task, or None once it is finished (or never existed)."""
        return readmodel.task(self.client, self._check_id(task_id))

    def counts(self) -> dict[str, Any]:
        """Tasks per state and the queue's counters, read atomically."""
        return readmodel.queue_counts(self.client, self.name)

    def failures(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest failures first: id, payload, error, traceback, attempts, worker, failed_at."""
        return readmodel.failures(self.client, self.name, limit=limit)

    def expired(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest tasks that expired before they started (``expires=``), newest first: id,
        state ("expired"), created_at, expires_at, expired_at, tags (the last 1,000 are kept)."""
        return readmodel.expired(self.client, self.name, limit)

    def is_paused(self) -> bool:
        return readmodel.is_paused(self.client, self.name)

    def limits(self) -> dict[str, Any]:
        """The queue's limits and their current use: ``concurrency``, ``rate`` ([starts, seconds]),
        ``partition_concurrency``, ``partition_rate`` (None: no limit), ``handler`` and
        ``overrides`` (where they come from), ``active`` (slots in use, ``kept`` ones included),
        ``kept``, ``starts_in_window``, ``held_back``, ``runnable`` and ``partitions`` (README
        "Limits")."""
        return readmodel.limits(self.client, self.name)

    def set_limits(
        self,
        *,
        concurrency: Any = _UNSET,
        rate: Any = _UNSET,
        partition_concurrency: Any = _UNSET,
        partition_rate: Any = _UNSET,
        reset: bool = False,
    ) -> dict[str, Any]:
        """Override the handler's limits, durably and for every worker at once (their next start
        obeys): each option given is a value, or None for "no limit"; those not given keep their
        override if any. ``reset=True`` drops every override first (back to the handler's values),
        then sets those given. Returns ``limits()``. A bad value raises InvalidInput naming the
        queue and option, and changes nothing."""
        given = {
            "concurrency": concurrency,
            "rate": rate,
            "partition_concurrency": partition_concurrency,
            "partition_rate": partition_rate,
        }
        given = {k: v for k, v in given.items() if v is not _UNSET}
        if reset is not True and reset is not False:
            raise InvalidInput(f"queue {self.name!r}: reset must be True or False, not {reset!r}")
        if not given and not reset:
            raise InvalidInput(f"queue {self.name!r}: set_limits needs a limit to set, or reset=True")
        try:
            args = override_args(self.name, given)
        except ConfigurationError as exc:
            raise InvalidInput(str(exc).replace("handler ", "queue ", 1)) from None
        commands.set_limits(self.name, args, reset=reset).run(self.client)
        self.client.sadd(keys.KNOWN_QUEUES, self.name)
        return self.limits()

    # -- managing --------------------------------------------------------------------------

    def cancel(self, task_id: str) -> bool:
        """Cancel a task: True if it was pending, delayed, waiting (removed) or active (its worker
        is told to stop it); False if unknown. A failed or completed task raises InvalidState."""
        return self.cancel_outcome(task_id) is not None

    def cancel_outcome(self, task_id: str) -> Literal["removed", "stopping"] | None:
        """Cancel a task and say what that did: ``"removed"`` (it had not started and never will),
        ``"stopping"`` (it was running: its worker is told to stop it), or None (no such task).
        A failed or completed task raises InvalidState."""
        code = commands.cancel(self.name, self._check_id(task_id)).run(self.client)
        if code == Code.UNKNOWN:
            return None
        commands.check(code, "cancel", self.name, task_id)
        if code == Code.REMOVED:
            workflows.drain(self.client, self.name)
        return "stopping" if code == Code.STOPPING else "removed"

    def retry(self, task_id: str) -> bool:
        """Put a failed task back at the tail of the queue with its attempts reset."""
        code = commands.retry(self.name, [self._check_id(task_id)]).run(self.client)[0]
        commands.check(code, "retry", self.name, task_id)
        return True

    def run_now(self, task_id: str, where: Literal["front", "tail"] = "front") -> bool:
        """Run a delayed task now: it goes before every pending task (``where="front"``) or after
        them (``"tail"``), at once and atomically. Raises InvalidState if it is no longer delayed."""
        if where not in ("front", "tail"):
            raise InvalidInput(f"where must be 'front' or 'tail', not {where!r}")
        code = commands.run_now(self.name, self._check_id(task_id), where).run(self.client)
        commands.check(code, "run_now", self.name, task_id)
        return True

    def retry_all(self) -> int:
        """Retry every failed task; returns how many."""
        total = 0
        while ids := readmodel.failed_ids(self.client, self.name, _BATCH):
            total += sum(1 for c in commands.retry(self.name, ids).run(self.client) if c == Code.REQUEUED)
        return total

    def delete(self, task_id: str, finished_only: bool = False) -> bool:
        """Delete a task in any state but active; ``finished_only``: only a failed or completed
        one (a task that has not run raises InvalidState: removing it is a cancel)."""
        code = commands.delete(self.name, [self._check_id(task_id)], finished_only).run(self.client)[0]
        commands.check(code, "delete", self.name, task_id)
        workflows.drain(self.client, self.name)
        return True

    def pause(self) -> bool:
        """Stop starting tasks (enqueues are still accepted); durable, seen by every worker at once."""
        changed = commands.pause(self.name, True).run(self.client)
        self.client.sadd(keys.KNOWN_QUEUES, self.name)
        return changed

    def resume(self) -> bool:
        return commands.pause(self.name, False).run(self.client)

    def purge(self) -> int:
        """Delete every task waiting to run (pending, and waiting for a lock); returns how many.
        Delayed, active and failed tasks stay."""
        total, more = 0, True
        while more:
            deleted, more = commands.purge(self.name, _BATCH).run(self.client)
            total += deleted
        workflows.drain_all(self.client, self.name)
        return total

    def drop(self) -> None:
        """Delete the queue: every task and key, counters and the operator's limits included;
        running tasks are stopped. A handler that runs on (a sync one can't be stopped) keeps its
        lock and its slots under the limits until it returns, as a cancelled one does. The workers
        serving the queue stay registered (with their handlers' limits); with none, nothing of
        the queue is left. The children (``after=``) and batches of its tasks, in other queues,
        are told they were deleted, after each step of ``_BATCH`` tasks."""
        while commands.drop(self.name, _BATCH).run(self.client):
            workflows.drain_all(self.client, self.name, dropping=True)
        self.client.delete(keys.queue_key(self.name, "depth"))  # samples taken from Python
        if not self.client.exists(keys.queue_key(self.name, "workers")):  # served: still listed
            self.client.srem(keys.KNOWN_QUEUES, self.name)
