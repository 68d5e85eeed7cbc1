"""Encrypted payloads: ``WORQR["ENCRYPTION_KEYS"]`` and ``WORQR["ENCRYPTED_QUEUES"]``.

The payloads of an encrypted queue are stored in Redis as authenticated ciphertext (AES-256-GCM,
from the ``cryptography`` package), the queue name and the task id bound as associated data (a
payload copied to another task or queue does not open). A sealed payload is, in bytes:

    b"wqe1" + key id (4: the first bytes of the key's SHA-256) + nonce (12) + ciphertext + tag (16)

and the plaintext it opens to is one byte (``b"b"``: the producer gave bytes, ``b"s"``: text)
then the payload. The task's payload kind (field ``y``) is ``e``. The first key encrypts; every
key decrypts (a payload names its key by id), so keys rotate without downtime: add the new key
first, run ``manage.py encryption rotate <queue>``, then drop the old one. Payloads are opened
only in the worker (before the handler runs), in the Tasks backend and, for users with
``queues.view_encrypted_payload``, on the dashboard: everywhere else they read ``Sealed``.

``cryptography`` is imported by the first keyring with a key: its Rust library is about 9 MiB of every
process's memory, which a project that encrypts nothing does not pay.
"""

import base64
import binascii
import hashlib
import os

from .errors import ConfigurationError, WorqrError

MAGIC = b"wqe1"
#: Bytes a sealed payload adds to the producer's: magic, key id, nonce, kind byte and tag.
OVERHEAD = 4 + 4 + 12 + 1 + 16
_KINDS = {"": b"s", "b": b"b"}


class Sealed(bytes):
    """A payload (or kept result) of an encrypted queue as Redis holds it (its kind ``e``):
    ciphertext, opened by ``open_payload`` (``open_result``) where that is allowed."""

    def __repr__(self):
        return f"<Sealed, {len(self)} bytes>"


class PayloadUnreadable(WorqrError):
    """A sealed payload that none of ``WORQR["ENCRYPTION_KEYS"]`` opens (a key removed too early,
    or a payload changed in Redis): its task fails with this error; the worker goes on."""


def parse_key(text, where="WORQR['ENCRYPTION_KEYS']"):
    """The 32 bytes of a urlsafe base64 key, or ConfigurationError saying what is wrong (never
    the key itself)."""
    if not isinstance(text, str):
        raise ConfigurationError(f"{where}: each key must be a string (urlsafe base64 of 32 bytes)")
    try:
        raw = base64.urlsafe_b64decode(text.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ConfigurationError(f"{where}: a key is not urlsafe base64") from None
    if len(raw) != 32:
        raise ConfigurationError(f"{where}: a key must be 32 bytes once decoded, not {len(raw)}")
    return raw


def new_key():
    """A fresh key, as ``ENCRYPTION_KEYS`` takes it."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def key_id(key):
    return hashlib.sha256(key).digest()[:4]


class Keyring:
    """The parsed keys (the first encrypts), each with its id."""

    def __init__(self, texts):
        self.keys = [parse_key(t) for t in texts]
        self.by_id = {}
        if not self.keys:
            self.newest = None
            return
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        for key in self.keys:
            self.by_id.setdefault(key_id(key), AESGCM(key))
        self.newest = key_id(self.keys[0])

    def seal(self, queue, task_id, raw, kind, part="payload"):
        """``raw`` (the producer's bytes; ``kind`` '' text or 'b' bytes) sealed for that task's
        ``part``: its "payload", or its kept "result" (one does not open as the other)."""
        nonce = os.urandom(12)
        sealed = self.by_id[self.newest].encrypt(nonce, _KINDS[kind] + raw, _aad(queue, task_id, part))
        return MAGIC + self.newest + nonce + sealed

    def open(self, queue, task_id, blob, part="payload"):
        """``(raw, kind)`` of a sealed payload (or result), or PayloadUnreadable naming the task."""
        blob = bytes(blob)
        aead = self.by_id.get(blob[4:8]) if blob[:4] == MAGIC else None
        if aead is None:
            raise PayloadUnreadable(
                f"task {task_id} of queue {queue}: its {part} was sealed with a key not in "
                f"WORQR['ENCRYPTION_KEYS'] (or is not sealed)"
            )
        from cryptography.exceptions import InvalidTag  # loaded with the keyring's AESGCM

        try:
            plain = aead.decrypt(blob[8:20], blob[20:], _aad(queue, task_id, part))
        except InvalidTag:
            raise PayloadUnreadable(
                f"task {task_id} of queue {queue}: its {part} does not open (changed, or sealed for another task)"
            ) from None
        return plain[1:], "b" if plain[:1] == b"b" else ""

    def is_newest(self, blob):
        return bytes(blob[:8]) == MAGIC + self.newest


def _aad(queue, task_id, part="payload"):
    """What a sealed text is bound to: its queue, its task and (a kept result) its part."""
    return (f"{queue}\0{task_id}" if part == "payload" else f"{queue}\0{task_id}\0{part}").encode()


_rings = {}


def keyring(config):
    """The Keyring of ``config.encryption_keys`` (made once per key list)."""
    ring = _rings.get(config.encryption_keys)
    if ring is None:
        ring = _rings[config.encryption_keys] = Keyring(config.encryption_keys)
    return ring


def encrypts(config, queue):
    """Whether ``queue``'s payloads are sealed."""
    return queue in config.encrypted_queues


def open_result(config, task):
    """``task.result`` opened if it is Sealed (a task of an encrypted queue keeps its result sealed),
    else as it is; PayloadUnreadable when no key opens it."""
    if not isinstance(task.result, Sealed):
        return task.result
    return keyring(config).open(task.queue, task.id, task.result, part="result")[0]


def open_payload(config, task):
    """``task.payload`` opened if it is Sealed (as the producer gave it: str or bytes), else as it
    is; PayloadUnreadable when no key opens it."""
    if not isinstance(task.payload, Sealed):
        return task.payload
    raw, kind = keyring(config).open(task.queue, task.id, task.payload)
    return raw if kind == "b" else raw.decode("utf-8", "surrogateescape")
