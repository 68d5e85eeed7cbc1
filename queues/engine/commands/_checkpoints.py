"""A generator handler's calls: begin a run (count it, read the last checkpoint), save a checkpoint."""

from ..codes import Code
from ._call import Call, _code


def _begun(reply):
    if Code(reply[0]) != Code.OK:
        return Code(reply[0]), None, 0
    return Code.OK, reply[1], int(reply[2])


def checkpoint_begin(queue, task_id, lease):
    """A checkpointed handler begins a run of ``task_id`` under ``lease``: the run is counted.
    Returns (OK, the last checkpoint's JSON text or None, runs) or (STALE, None, 0)."""
    return Call("checkpoint_begin", queue, (task_id, lease), _begun)


def checkpoint(queue, task_id, lease, value):
    """Save ``value`` (JSON text, checked and bounded by the caller) as the checkpoint of
    ``task_id`` under ``lease``: OK, or STALE (the task is no longer active under that lease)."""
    return Call("checkpoint", queue, (task_id, lease, value), _code)
