"""The enqueue options, each named, for type checkers and for a clear error at run time.

``Queue.enqueue(payload, **options)`` and ``Queue.enqueue_many(payloads, **options)`` take their
options as ``**options: Unpack[EnqueueOptions]`` / ``Unpack[TaskOptions]`` (PEP 692): mypy or
pyright flag a misspelt or mistyped option in the caller's code (``dealy=30``), and at run time
``check_names`` refuses an unknown one with ``InvalidTask`` naming it and the nearest known name,
before anything is written.
"""

from collections.abc import Iterable
from datetime import datetime
from difflib import get_close_matches
from typing import Literal, TypedDict

from .errors import InvalidTask

#: What a task's payload may be: text (str), or bytes kept byte for byte.
Payload = str | bytes


class BatchOptions(TypedDict, total=False):
    """The options of a task a batch takes (``Batch.enqueue``'s): each task's but the task
    controls, which only the enqueue script decides (``unique`` is refused at run time)."""

    #: Seconds before the task may run (a delayed task), or
    delay: float
    #: the moment it may run (an aware datetime); give one of ``delay`` and ``eta``.
    eta: datetime
    #: Retries after a failed attempt (the handler's, else ``WORQR["RETRIES"]``, when not given).
    retries: int
    #: Seconds the handler may run.
    timeout: float
    #: Seconds before the first retry, doubled for each next one.
    backoff: float
    #: A lock the task holds while it runs (its key).
    lock: str
    #: True: a key made from the payload; or the key: while a task with it is pending or running,
    #: enqueueing returns that task's id.
    unique: bool | str
    #: A URL told of the task's end (webhooks).
    callback: str
    #: Text kept with the task.
    meta: str
    #: Tags, indexed per queue (search: ``tag:``).
    tags: Iterable[str]


class TaskOptions(BatchOptions, total=False):
    """The options of each task of an enqueue (``Queue.enqueue_many``'s): a batch's, and the task
    controls."""

    #: Seconds (or an aware datetime) by which the task must start, else it ends ``expired``.
    expires: float | datetime
    #: ``(key, seconds)``: further enqueues with the key inside the window add nothing and
    #: return the first task's id.
    throttle: tuple[str, float]
    #: ``(key, seconds)``: the task runs ``seconds`` after the last enqueue with the key, with the
    #: last payload.
    debounce: tuple[str, float]


class EnqueueOptions(TaskOptions, total=False):
    """``Queue.enqueue``'s options: each task's, and its parents."""

    #: Task ids (of any queues, at most 1,000) that must complete before this task runs.
    after: Iterable[str] | None
    #: What a parent that does not complete does to it: cancel it (the default) or let it run.
    on_parent_failure: Literal["cancel", "run"]


class ManyOptions(EnqueueOptions, total=False):
    """``Queue.enqueue_many``'s options, for a subclass that takes them all as ``**options``."""

    #: The tasks' ids (made with ``new_task_id``), one per payload, instead of fresh ones.
    ids: Iterable[str] | None


#: Every option's name, as the methods take them.
NAMES = frozenset(ManyOptions.__annotations__)

#: The task controls (docs/task-controls.md): decided by the enqueue script itself, so an enqueue
#: that writes its tasks another way (the outbox, a batch) can't take them.
CONTROLS = ("expires", "throttle", "debounce")


def check_names(options):
    """Raise InvalidTask for an option of ``options`` (a dict) that no enqueue takes (names
    starting with ``_`` are the engine's own)."""
    for name in options:
        if name not in NAMES and not name.startswith("_"):
            near = get_close_matches(name, sorted(NAMES), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            known = ", ".join(sorted(NAMES))
            raise InvalidTask(f"unknown enqueue option {name!r}{hint}; the options are: {known}")


def refuse_controls(options, where):
    """Raise InvalidTask for a task control (``CONTROLS``) in ``options``, which ``where`` can't take."""
    for name in CONTROLS:
        if name in options:
            raise InvalidTask(f"{name}= can't be combined with {where} (see docs/task-controls.md)")
