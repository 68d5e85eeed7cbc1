"""Encrypted payloads (``WORQR["ENCRYPTION_KEYS"]``, ``ENCRYPTED_QUEUES``): what Redis holds is
ciphertext bound to its queue and task, the worker's delivery opens it, older keys still open,
rotation re-seals with the newest key in bounded steps, and bad keys are refused."""

import os
import subprocess
import sys

import pytest

from queues import Queue
from queues.engine import connection, crypto
from queues.engine.config import Config
from queues.engine.errors import ConfigurationError, InvalidTask
from tests.engine_calls import fail, finish, take

OLD, NEW = crypto.new_key(), crypto.new_key()


@pytest.fixture
def sealed(_engine):
    """The engine configured with queues "vault" and "vault2" encrypted under OLD."""
    config = _engine.config.with_(encryption_keys=(OLD,), encrypted_queues=frozenset({"vault", "vault2"}))
    conn = connection.configure(config, os.environ["WORQR_REDIS_URL"])
    yield conn


def _secrets(n):
    return [f"card {i:04d}-4111-1111-1111 exp 12/29 cvv {i:03d} name Jane Doe" for i in range(n)]


def _raw_dump(client, queue):
    """Every byte Redis holds for the queue: DUMP of each key, and HGETALL of each hash."""
    out = []
    for key in client.scan_iter(match=f"worqr:{{{queue}}}:*", count=1000):
        out.append(client.dump(key) or b"")
        if client.type(key) == b"hash":
            for k, v in client.hgetall(key).items():
                out += [k, v]
    return b"\0".join(out)


def test_redis_holds_no_plaintext_of_the_payloads(sealed):
    """No 16-byte run of any payload is anywhere in the queue's keys, in any state."""
    client = sealed.client  # the session's client was closed with its connection
    q = Queue("vault")
    payloads = _secrets(30)
    ids = q.enqueue_many(payloads[:10])
    q.enqueue_many(payloads[10:20], delay=60)
    q.enqueue(payloads[20].encode(), meta="m")
    for p in payloads[21:]:
        q.enqueue(p)
    (task,) = take(client, "vault")
    fail(client, task)  # into the failed set and the failure history
    dump = _raw_dump(client, "vault")
    for p in payloads:
        raw = p.encode()
        assert not any(raw[i : i + 16] in dump for i in range(len(raw) - 15)), p
    assert task.payload != payloads[0] and isinstance(task.payload, crypto.Sealed)
    assert crypto.open_payload(sealed.config, task) == payloads[0]
    assert q.get(ids[1]).as_dict()["payload"] == "encrypted"
    assert q.failures()[0]["payload"] == "encrypted"


def test_a_payload_opens_only_for_its_own_task_and_queue(sealed):
    """Copying a sealed payload to another task or queue makes it unreadable."""
    ring = crypto.keyring(sealed.config)
    blob = ring.seal("vault", "vault-0000000000000001", b"secret", "")
    assert ring.open("vault", "vault-0000000000000001", blob) == (b"secret", "")
    for queue, task_id in (("vault", "vault-0000000000000002"), ("vault2", "vault-0000000000000001")):
        with pytest.raises(crypto.PayloadUnreadable, match="does not open"):
            ring.open(queue, task_id, blob)


def test_older_keys_still_open_and_a_removed_key_is_a_clear_error(sealed):
    """Sealed under OLD: opens with [NEW, OLD]; with [NEW] alone it raises PayloadUnreadable naming the task."""
    client = sealed.client  # the session's client was closed with its connection
    task_id = Queue("vault").enqueue("hello, sealed world")
    (task,) = take(client, "vault")
    assert crypto.open_payload(sealed.config.with_(encryption_keys=(NEW, OLD)), task) == "hello, sealed world"
    with pytest.raises(crypto.PayloadUnreadable, match=f"task {task_id} of queue vault"):
        crypto.open_payload(sealed.config.with_(encryption_keys=(NEW,)), task)


def test_debounce_is_refused_on_an_encrypted_queue(sealed):
    """A debounce replaces another task's payload: not on an encrypted queue (its payload is bound to its task)."""
    with pytest.raises(InvalidTask, match="encrypted"):
        Queue("vault").enqueue("x", debounce=("k", 1))


@pytest.mark.parametrize(
    "keys_, queues, words",
    [
        (["not base64!"], [], "not urlsafe base64"),
        (["QUJD"], [], "32 bytes"),
        ([], ["vault"], "needs WORQR\\["),
        ("abc", [], "list of strings"),
    ],
)
def test_malformed_keys_are_refused(keys_, queues, words):
    """A bad key or setting is a ConfigurationError (the system check's queues.E001); the key is never quoted."""
    with pytest.raises(ConfigurationError, match=words) as err:
        Config.from_mapping({"ENCRYPTION_KEYS": keys_, "ENCRYPTED_QUEUES": queues})
    assert "not base64!" not in str(err.value)


@pytest.mark.django_db
def test_the_dashboard_shows_encrypted_unless_the_user_may_see_it(sealed):
    """Queue and task pages show "encrypted"; the task page opens it for view_encrypted_payload only."""
    from django.test import Client
    from django.urls import reverse

    from tests.test_dashboard_views import make_user

    task_id = Queue("vault").enqueue("the card is 4111-1111-1111-1111")
    pages = {}
    for name, perms in (("viewer", ["view_dashboard"]), ("keeper", ["view_dashboard", "view_encrypted_payload"])):
        web = Client()
        web.force_login(make_user(name, perms=perms))
        pages[name] = (
            web.get(reverse("queues:queue", args=["vault"])).content.decode(),
            web.get(reverse("queues:task", args=[task_id])).content.decode(),
        )
    for name in ("viewer", "keeper"):
        assert "4111-1111" not in pages[name][0] and "encrypted" in pages[name][0]
    assert "4111-1111" not in pages["viewer"][1] and "needs the permission" in pages["viewer"][1]
    assert "the card is 4111-1111-1111-1111" in pages["keeper"][1]


@pytest.mark.django_db
def test_a_batch_callback_into_an_encrypted_queue_stays_sealed_until_its_task_runs(sealed):
    """Ciphertext in Redis, "encrypted" on the batch page and from Batch.get; the callback task opens to it."""
    from django.test import Client
    from django.urls import reverse

    from queues.engine import Batch, keys, workflows
    from tests.test_dashboard_views import make_user

    client = sealed.client
    secret = "the card is 4111-1111-1111-1111"
    b = Batch(on_success=("vault", secret), on_complete=("vault2", secret.encode() + b"\xff"))
    b.enqueue("plain", "row")
    assert b"4111-1111" not in b"".join(client.hgetall(keys.batch_key(b.id, "batch")).values())
    info = Batch.get(b.id)
    assert (info["on_success"], info["on_complete"]) == (["vault", "encrypted"], ["vault2", "encrypted"])
    web = Client()
    web.force_login(make_user("keeper", perms=["view_dashboard", "view_encrypted_payload"]))
    page = web.get(reverse("queues:batch", args=[b.id])).content.decode()
    assert "4111-1111" not in page and "vault: encrypted" in page
    b.close()
    (row,) = take(client, "plain")
    finish(client, row)
    workflows.drain_all(client, "plain")
    (success,) = take(client, "vault")
    (complete,) = take(client, "vault2")
    assert crypto.open_payload(sealed.config, success) == secret
    assert crypto.open_payload(sealed.config, complete) == secret.encode() + b"\xff"


def test_a_batch_callback_no_key_opens_stays_due_and_is_enqueued_once_the_key_is_back(sealed, caplog):
    """Its key dropped: the drain logs it and goes on, the batch stays due; with the key back, the sweep enqueues it once."""
    from queues.engine import Batch, batches, keys, workflows

    client = sealed.client
    b = Batch(on_complete=("vault", "the card is 4111"))
    b.enqueue("plain", "row")
    b.close()
    # (configure closes the connection before it: each step uses the new one's client)
    client = connection.configure(sealed.config.with_(encryption_keys=(NEW,)), os.environ["WORQR_REDIS_URL"]).client
    (row,) = take(client, "plain")
    finish(client, row)
    workflows.drain_all(client, "plain")  # no exception: the drain goes on
    assert "its complete callback is not enqueued" in caplog.text
    assert Queue("vault").counts()["enqueued"] == 0 and client.zscore(keys.BATCHES_DUE, b.id) is not None
    client = connection.configure(sealed.config, os.environ["WORQR_REDIS_URL"]).client  # OLD is back
    batches.sweep(client, 10**13)
    batches.sweep(client, 10**13)
    assert Queue("vault").counts()["enqueued"] == 1 and client.zscore(keys.BATCHES_DUE, b.id) is None
    (callback,) = take(client, "vault")
    assert crypto.open_payload(sealed.config, callback) == "the card is 4111"


def test_a_batch_callback_payload_is_bounded_as_an_enqueue_s(sealed):
    """A callback payload over MAX_PAYLOAD_BYTES is refused with PayloadTooLarge; no batch is opened."""
    from queues.engine import Batch, keys
    from queues.engine.errors import PayloadTooLarge

    too_big = "x" * (sealed.config.max_payload_bytes + 1)
    for options in ({"on_success": ("vault", too_big)}, {"on_complete": ("plain", too_big.encode())}):
        with pytest.raises(PayloadTooLarge, match="over the limit"):
            Batch(**options)
    assert sealed.client.zcard(keys.BATCHES) == 0


@pytest.mark.django_db
def test_an_ended_tasks_record_keeps_the_ciphertext_and_opens_for_the_keeper(sealed):
    """An ended encrypted task's record holds no plaintext; its page opens it for the keeper only, whole."""
    from django.test import Client
    from django.urls import reverse

    from tests.support.dashboard import make_user

    client = sealed.client
    q = Queue("vault2")
    short, long = "the card is 4111-1111-1111-1111", "card 5500-0000-0000-0004 " * 400
    ids = [q.enqueue(short), q.enqueue(long)]
    for task in take(client, "vault2", count=2):
        finish(client, task)
    dump = _raw_dump(client, "vault2")
    assert b"4111-1111-1111-1111" not in dump and b"5500-0000-0000-0004" not in dump
    pages = {}
    for name, perms in (("viewer2", ["view_dashboard"]), ("keeper2", ["view_dashboard", "view_encrypted_payload"])):
        web = Client()
        web.force_login(make_user(name, perms=perms))
        pages[name] = [web.get(reverse("queues:task", args=[i])).content.decode() for i in ids]
    assert all("4111-1111" not in p and "5500-0000" not in p for p in pages["viewer2"])
    assert "needs the permission" in pages["viewer2"][0]
    assert short in pages["keeper2"][0]
    assert "keeps only part of its" in pages["keeper2"][1] and "5500-0000" not in pages["keeper2"][1]


def test_a_worker_that_encrypts_nothing_does_not_load_the_cryptography_library():
    """cryptography's Rust library (about 10 MiB of resident memory) is loaded by the first keyring with a key: ..."""
    # ... a worker process (the settings as ``manage.py worker`` sees them) with the worker command, the engine and
    # an empty keyring imported has not loaded it,
    # and one keyring with a key loads it (so the check can fail).
    probe = (
        "import sys, django; sys.argv = ['manage.py', 'worker']; django.setup();"
        "import queues.management.commands.worker, queues.engine.worker.processor;"
        "from queues.engine import crypto; crypto.Keyring([]);"
        "before = 'cryptography.hazmat.bindings._rust' in sys.modules;"
        "crypto.Keyring([crypto.new_key()]);"
        "print(before, 'cryptography.hazmat.bindings._rust' in sys.modules)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
