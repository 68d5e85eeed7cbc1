"""Encrypted payloads with a real worker: its handler gets the payload as enqueued (text and
bytes), and a payload no key opens fails its task with a clear error while the worker goes on."""

import json
import os

from queues import Queue
from queues.engine import connection, crypto
from tests.conftest import records, wait_for, wait_registered

OLD, NEW = crypto.new_key(), crypto.new_key()


def _env(*keys_):
    return {"WORQR_TEST_ENCRYPTION_KEYS": ",".join(keys_), "WORQR_TEST_ENCRYPTED_QUEUES": "vault"}


def test_the_handler_gets_the_payload_and_an_unreadable_one_fails_cleanly(_engine, client, workers):
    """Under [NEW, OLD] the worker opens tasks sealed with either; one sealed with a key it lacks fails, naming the task."""
    seal = lambda k: connection.configure(  # noqa: E731
        _engine.config.with_(encryption_keys=k, encrypted_queues=frozenset({"vault"})), os.environ["WORQR_REDIS_URL"]
    )
    seal((OLD,))
    q = Queue("vault")
    text_id = q.enqueue(json.dumps({"secret": "sealed under the old key"}))
    bytes_id = q.enqueue(b"\x00\xffraw bytes, sealed")
    seal((crypto.new_key(),))
    lost_id = q.enqueue(json.dumps({"secret": "sealed under a key the worker lacks"}))
    client = seal((NEW,)).client  # the session's client was closed with its connection
    new_id = q.enqueue("sealed under the new key")
    w = workers(["vault"], concurrency=2, name="vault-0", env=_env(NEW, OLD))
    wait_registered(client, w.name)
    recs = wait_for(lambda: (r := records(client, "vault")) and len(r) == 3 and r, timeout=30, message="three runs")
    got = {r["id"]: (bytes.fromhex(r["payload"]) if r["bytes"] else r["payload"]) for r in recs}
    assert got == {
        text_id: json.dumps({"secret": "sealed under the old key"}),
        bytes_id: b"\x00\xffraw bytes, sealed",
        new_id: "sealed under the new key",
    }
    failed = wait_for(lambda: q.failures(), timeout=30, message="the unreadable task's failure")
    assert failed[0]["id"] == lost_id and "PayloadUnreadable" in failed[0]["error"]
    assert f"task {lost_id} of queue vault" in failed[0]["error"]
    assert w.proc.poll() is None  # the worker goes on
