"""Key rotation (``manage.py encryption rotate``) with 100,000 pending tasks: every payload ends
sealed with the newest key and still opens to what was enqueued, and no call to Redis works for
more than 50 ms (by Redis's own SLOWLOG: the work of each call, not wall time under load)."""

import json
import os
from io import StringIO

import pytest
from django.core.management import call_command

from queues import Queue
from queues.engine import connection, crypto, rotation
from tests.engine_calls import take
from tests.stress import slow_commands

OLD, NEW = crypto.new_key(), crypto.new_key()
PENDING = 100_000


def _configure(_engine, keys_):
    config = _engine.config.with_(encryption_keys=keys_, encrypted_queues=frozenset({"vault"}))
    return connection.configure(config, os.environ["WORQR_REDIS_URL"])


def test_rotation_of_100000_pending_tasks_in_bounded_calls(_engine, client, slowlog):
    """All 100,000 re-sealed with NEW; SLOWLOG (threshold 5 ms) shows no call over 50 ms; payloads open to the same text."""
    _configure(_engine, (OLD,))
    q = Queue("vault")
    for start in range(0, PENDING, 5000):
        q.enqueue_many([json.dumps({"n": n, "secret": "x" * 40}) for n in range(start, start + 5000)])
    conn = _configure(_engine, (NEW, OLD))
    stalls = slowlog(5000)
    steps = []
    done = rotation.rotate(conn.client, conn.config, "vault", progress=lambda r: steps.append(r.calls))
    slow = slow_commands(conn.client, 5000, stalls)
    assert done.resealed == PENDING and done.unreadable == 0
    assert [c for c in slow if c[0] > 50_000] == [], slow[:5]
    print(f"rotation: {done.calls} calls for {PENDING} tasks; calls over 5 ms: {len(slow)}; slowest: {slow[:3]}")
    # the newest key alone opens every payload now
    conn = _configure(_engine, (NEW,))
    tasks = take(conn.client, "vault", count=50)
    assert [json.loads(crypto.open_payload(conn.config, t))["n"] for t in tasks] == list(range(50))
    again = rotation.rotate(conn.client, conn.config, "vault")
    assert again.resealed == 0 and again.current == PENDING


@pytest.mark.django_db
def test_the_rotate_command(_engine, settings):
    """`encryption rotate vault` reports what it did; `encryption key` prints a key the setting takes; a plain queue is refused."""
    _configure(_engine, (OLD,))
    Queue("vault").enqueue_many(["a", "b"])
    settings.WORQR = {**settings.WORQR, "ENCRYPTION_KEYS": [NEW, OLD], "ENCRYPTED_QUEUES": ["vault"]}
    _configure(_engine, (NEW, OLD))
    out = StringIO()
    call_command("encryption", "rotate", "vault", stdout=out)
    assert "2 sealed anew" in out.getvalue()
    key = StringIO()
    call_command("encryption", "key", stdout=key)
    crypto.parse_key(key.getvalue().strip())
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="not in WORQR\\['ENCRYPTED_QUEUES'\\]"):
        call_command("encryption", "rotate", "plain")
