"""Settings of the worqr project. Every worqr setting is in WORQR (see README.md); the
environment variables read here are listed in the README's Configuration section."""

import os
import sys
from pathlib import Path

from csp.constants import NONE, SELF

from . import secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
#: The installation's own files: the SQLite database, the secret key, the embedded Redis.
WORQR_VAR_DIR = Path(os.environ.get("WORQR_VAR_DIR") or BASE_DIR / "var")

DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
# A published key is refused at start with DEBUG off (the queues app: queues.published_keys).
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or secret_key.installation_key(WORQR_VAR_DIR / "secret_key")
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# HTTPS (DJANGO_HTTPS=1 in production): redirect to https, cookies only over https, HSTS.
HTTPS = os.environ.get("DJANGO_HTTPS", "") == "1"
SECURE_SSL_REDIRECT = SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS") or (31536000 if HTTPS else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
if os.environ.get("DJANGO_PROXY_SSL_HEADER", "") == "1":  # behind a proxy that terminates TLS
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Apps only a web process uses: a worker (`manage.py worker`) serves no request and leaves them
# out. daphne's app only makes `runserver` serve ASGI (the dashboard's websockets); importing it
# pulls in Twisted and Autobahn (about 26 MiB per process). The admin (its autodiscovery imports
# every app's admin, forms and views) and the sessions, messages, static files, channels and CSP
# apps the dashboard and the admin need cost a worker about 3 MiB more. Its handlers still have
# the models (auth, contenttypes, queues, sample) and the database.
_WORKER = len(sys.argv) > 1 and sys.argv[1] == "worker" and Path(sys.argv[0]).name == "manage.py"
_WEB_ONLY = {
    "daphne",
    "django.contrib.admin",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "csp",
}

INSTALLED_APPS = [
    app
    for app in (
        "daphne",
        "django.contrib.admin",
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "whitenoise.runserver_nostatic",
        "django.contrib.staticfiles",
        "channels",
        "csp",
        "queues",
        "sample",
        "chaos",  # this repository's chaos soak (manage.py chaos); not part of the worqr package
    )
    if not (_WORKER and app in _WEB_ONLY)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

# Content-Security-Policy (django-csp): scripts, styles and connections from the site itself
# only. The dashboard and the admin have no inline script or style, so none is allowed.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],  # the dashboard's websocket (same origin)
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

ROOT_URLCONF = "worqr_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "worqr_site.wsgi.application"
ASGI_APPLICATION = "worqr_site.asgi.application"

# SQLite written by several processes and threads at once (the web server, every worker's outbox
# relay, the outbox's deleter thread): each transaction takes the write lock at BEGIN, waiting for
# it up to `timeout` seconds, instead of failing with "database is locked" when a transaction
# that read first tries to write (IMMEDIATE); readers never wait for the writer and a commit is
# one fsync (WAL); a commit is durable before it returns, so a task pushed after the commit
# belongs to a transaction that survives a power cut (synchronous=FULL). README, "Transactional
# enqueue".
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL",
}

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("WORQR_DB_PATH", str(WORQR_VAR_DIR / "db.sqlite3")),
        "OPTIONS": SQLITE_OPTIONS,
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise also serves files found by the staticfiles finders, so the dashboard's CSS and JS
# (and the admin's) are served even where collectstatic never ran (tests, a fresh checkout).
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "admin:login"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Channels: the dashboard's consumers read Redis pub/sub directly; no channel layer is needed.
CHANNEL_LAYERS = {}

WORQR = {
    # Empty: the embedded Redis in var/ is started on first use.
    "REDIS_URL": os.environ.get("WORQR_REDIS_URL", ""),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "worqr": {"handlers": ["console"], "level": os.environ.get("WORQR_LOG_LEVEL", "INFO"), "propagate": False}
    },
}
