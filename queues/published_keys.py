"""Secret keys anyone can read. With DEBUG off, a process whose ``SECRET_KEY`` (or one of its
``SECRET_KEY_FALLBACKS``, which still verify signatures) is one of them stops at start
(``QueuesConfig.ready``, so in every project that installs worqr: the web process, the workers
and every ``manage.py`` command): anyone could forge its sessions and signed values.

Published: worqr's old built-in demo key, the placeholder of ``deploy/worqr.env.example``, any
key with a placeholder's mark in it ("change-me", "changeme", "change_me", any case), and Django's
``django-insecure-`` keys (what ``startproject`` writes).
"""

from django.core.exceptions import ImproperlyConfigured

PUBLISHED = frozenset({"worqr-demo-insecure-change-me", "change-me-to-50-or-more-random-characters"})
_MARKS = ("change-me", "changeme", "change_me")


def is_published(key):
    """True if ``key`` is a key anyone can read (see the module doc)."""
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
    return text in PUBLISHED or text.startswith("django-insecure-") or any(m in text.lower() for m in _MARKS)


def refuse_published(secret_key, fallbacks=(), debug=False):
    """Raise ImproperlyConfigured if DEBUG is off and ``secret_key`` or a fallback is published."""
    if debug:
        return
    named = [("SECRET_KEY", secret_key)] + [(f"SECRET_KEY_FALLBACKS[{i}]", k) for i, k in enumerate(fallbacks or ())]
    for setting, key in named:
        if is_published(key):
            raise ImproperlyConfigured(
                f"{setting} is a published key (worqr's demo key, the deploy guide's placeholder or a "
                "django-insecure- key): with DEBUG off, set DJANGO_SECRET_KEY (or your SECRET_KEY) to a secret "
                'of your own, at least 50 random characters, e.g. python -c "import secrets; '
                "print(secrets.token_urlsafe(50))\" (worqr's own project: unset it to use the key it keeps in var/)"
            )
