"""The record of ended tasks: its pruning (``history.py``) and the links of tasks run again."""

from ._call import Call


def prune_history(queue, cutoffs, max_per_queue, step):
    """Prune the record of ended tasks (``history.py``): ``cutoffs`` (ms, for completed,
    cancelled and failed). Returns (records removed, 1 if more are due)."""
    return Call("prune_history", queue, (*(int(c) for c in cutoffs), int(max_per_queue), int(step)), tuple)


def note_again(queue, pairs):
    """Note tasks run again: ``pairs`` (new id, id of the task it runs again) each."""
    pairs = list(pairs)
    return Call("note_again", queue, (len(pairs), *(i for pair in pairs for i in pair)), int)
