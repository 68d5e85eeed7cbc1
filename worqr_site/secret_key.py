"""The project's SECRET_KEY: ``DJANGO_SECRET_KEY``, or else a key generated once per
installation and kept in ``<var>/secret_key`` (mode 0600), never one written in the source.

With DEBUG off, a published key (worqr's old built-in default, the deploy guide's placeholder,
Django's ``django-insecure-`` keys) stops the process at start: the app refuses it in every
project (``queues.published_keys``).
"""

import os
import secrets
import tempfile

from django.core.exceptions import ImproperlyConfigured

MIN_LENGTH = 50


def installation_key(path):
    """The key kept at ``path``, made (atomically, mode 0600) if there is none yet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secret_key.")  # created with mode 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(MIN_LENGTH) + "\n")
            os.link(tmp, path)  # fails if another process made it first: then theirs is used
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    if os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o600)
    key = path.read_text().strip()
    if len(key) < MIN_LENGTH:
        raise ImproperlyConfigured(f"{path} holds no usable secret key: delete it to have a new one made")
    return key
