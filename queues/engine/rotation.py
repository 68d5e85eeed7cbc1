"""Key rotation of an encrypted queue (``manage.py encryption rotate <queue>``): every task not
running whose payload is sealed with an older key of ``WORQR["ENCRYPTION_KEYS"]`` is sealed anew
with the newest (``crypto``), in bounded steps.

Each step is one ``SCAN`` of at most ``SCAN_COUNT`` of the queue's keys (its tasks are found by
their ``task:`` keys, in any state: pending, delayed, waiting, blocked, failed), one pipelined
read of at most ``STEP`` payloads, and one ``reseal`` script call that replaces those still as
read (a task started or changed meanwhile is left: it is looked at again on the next run). No
call holds Redis for more than a few milliseconds with any number of tasks (measured with
100,000 pending: ``tests/test_encryption_rotation.py``). Payloads no key opens are counted, not
changed.
"""

from dataclasses import dataclass

from . import commands, crypto, keys
from .task import PAYLOAD_FIELDS, payload_from_hash

#: Keys looked at per SCAN call, and payloads read and re-sealed per script call.
SCAN_COUNT = 1000
STEP = 100


@dataclass
class Rotated:
    looked: int = 0  # tasks looked at
    resealed: int = 0  # sealed anew with the newest key
    current: int = 0  # already sealed with it
    unreadable: int = 0  # opened by no key (left as they are)
    calls: int = 0  # calls to Redis


def rotate(client, config, queue, progress=None):
    """Re-seal ``queue``'s payloads with the newest key; returns ``Rotated``. ``progress``: called
    with the running ``Rotated`` after each step."""
    ring = crypto.keyring(config)
    out, prefix = Rotated(), keys.task_key(queue, "")
    batch = []
    for key in client.scan_iter(match=f"{prefix}*", count=SCAN_COUNT):
        batch.append(key.decode()[len(prefix) :])
        if len(batch) >= STEP:
            _step(client, ring, queue, batch, out, progress)
            batch = []
    if batch:
        _step(client, ring, queue, batch, out, progress)
    return out


def _step(client, ring, queue, ids, out, progress):
    p = client.pipeline(transaction=False)
    for task_id in ids:
        p.hmget(keys.task_key(queue, task_id), "y", *PAYLOAD_FIELDS)
    items = []
    for task_id, values in zip(ids, p.execute()):
        out.looked += 1
        if values[0] != b"e":
            continue
        blob = payload_from_hash({f.encode(): v for f, v in zip(PAYLOAD_FIELDS, values[1:]) if v is not None})
        if blob is None:
            continue
        if ring.is_newest(blob):
            out.current += 1
            continue
        try:
            raw, kind = ring.open(queue, task_id, blob)
        except crypto.PayloadUnreadable:
            out.unreadable += 1
            continue
        items.append((task_id, blob, ring.seal(queue, task_id, raw, kind)))
    out.calls += 1
    if items:
        out.resealed += commands.reseal(queue, items).run(client)
        out.calls += 1
    if progress is not None:
        progress(out)
