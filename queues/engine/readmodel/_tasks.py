"""Reads of tasks by id: one task, the states of many, a task's log, the tag index, and a
dashboard bulk action's progress."""

from .. import keys
from ..task import Task
from ._common import decode, read_tasks


def task(client, task_id):
    """Look a task up by id alone (the id names its queue); None if unknown."""
    queue = keys.queue_from_task_id(task_id)
    if queue is None:
        return None
    return Task.from_hash(task_id, queue, client.hgetall(keys.task_key(queue, task_id)))


def task_states(client, task_ids):
    """{id: state, or None once the task is gone (finished)} in one round trip."""
    ids = [i for i in task_ids if keys.queue_from_task_id(i)]
    p = client.pipeline(transaction=False)
    for task_id in ids:
        p.hmget(keys.task_key(keys.queue_from_task_id(task_id), task_id), "s", "c")
    return {task_id: state_of(*fields) for task_id, fields in zip(ids, p.execute() if ids else [])}


def state_of(s, c):
    """A task's state from its fields ``s`` and ``c``: no ``s`` is pending (``task.py``), no
    ``c`` either is no task (None)."""
    return decode(s) if s is not None else ("pending" if c is not None else None)


def task_log(client, task_id, limit=keys.TASK_LOG_MAX):
    """The last ``limit`` lines of a task's log (``task.log``), oldest first."""
    queue = keys.queue_from_task_id(task_id)
    if queue is None:
        return []
    return [decode(line) for line in client.lrange(keys.task_log_key(queue, task_id), -max(1, limit), -1)]


def tagged(client, queue, tag, offset=0, limit=50, newest_first=True):
    """One page of the tasks of ``queue`` carrying ``tag`` (live or failed), newest first:
    read from the tag index, so it costs O(page), whatever the queue's size."""
    key = keys.tag_key(queue, tag)
    fetch = client.zrevrange if newest_first else client.zrange
    return read_tasks(client, queue, fetch(key, offset, offset + limit - 1))


def tagged_count(client, queue, tag):
    """How many tasks of ``queue`` carry ``tag``."""
    return client.zcard(keys.tag_key(queue, tag))


def bulk_job(client, job_id):
    """The fields of a dashboard bulk job's progress record (``keys.bulk_job_key``) as text, or
    None if there is none (unknown, or expired)."""
    raw = client.hgetall(keys.bulk_job_key(job_id))
    return {decode(k): decode(v) for k, v in raw.items()} or None
