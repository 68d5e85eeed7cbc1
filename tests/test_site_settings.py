"""The project's settings as a deployment sees them (worqr_site.settings, in fresh processes):
a secret key generated per installation, a refusal to run with a published key, a clean
``check --deploy`` with the documented production environment, and a Content-Security-Policy."""

import os
import secrets
import stat
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from queues import Queue
from queues.published_keys import refuse_published
from tests.conftest import ROOT
from tests.support.api import Api, make_token

PUBLISHED_KEY = "worqr-demo-insecure-change-me"  # the default that was in the source


def run(*args, var_dir, **env):
    """``manage.py *args`` with the project's own settings and only the given DJANGO_ variables."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    full = {**base, "DJANGO_SETTINGS_MODULE": "worqr_site.settings", "WORQR_VAR_DIR": str(var_dir), **env}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def secret_key(var_dir, **env):
    out = run("shell", "-c", "from django.conf import settings; print(settings.SECRET_KEY)", var_dir=var_dir, **env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_without_django_secret_key_a_key_is_generated_per_installation(tmp_path):
    """With DJANGO_SECRET_KEY unset, the key is made once per installation, kept in var/ with mode 0600 and reused."""
    # another installation gets another key; none is the published one.
    first, other = tmp_path / "one", tmp_path / "two"
    key = secret_key(first)
    path = first / "secret_key"
    assert path.read_text().strip() == key and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(key) >= 50 and key != PUBLISHED_KEY and not key.startswith("django-insecure-")
    assert secret_key(first) == key
    assert secret_key(other) not in (key, "")
    assert secret_key(first, DJANGO_SECRET_KEY="k" * 10 + secrets.token_urlsafe(50)).startswith("k" * 10)


@pytest.mark.parametrize("key", [PUBLISHED_KEY, "django-insecure-" + "x" * 50])
def test_refuses_to_start_with_debug_off_and_a_published_key(tmp_path, key):
    """DEBUG off and a key that is published (worqr's old default, Django's insecure ones)."""
    # the project refuses to start and says why; with DEBUG on it runs.
    out = run("check", var_dir=tmp_path, DJANGO_SECRET_KEY=key)
    assert out.returncode != 0 and "DJANGO_SECRET_KEY" in out.stderr and "published" in out.stderr
    assert run("check", var_dir=tmp_path, DJANGO_SECRET_KEY=key, DJANGO_DEBUG="1").returncode == 0


def test_a_published_fallback_key_is_refused_too():
    """SECRET_KEY_FALLBACKS still verify signatures: a published key there is refused like SECRET_KEY (DEBUG off)."""
    good = secrets.token_urlsafe(50)
    refuse_published(good, [secrets.token_urlsafe(50)], debug=False)
    refuse_published(PUBLISHED_KEY, [PUBLISHED_KEY], debug=True)
    with pytest.raises(ImproperlyConfigured, match=r"SECRET_KEY_FALLBACKS\[1\] is a published key"):
        refuse_published(good, [good, "django-insecure-old"], debug=False)


def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    """The production variables the README lists make ``check --deploy`` report no issue."""
    out = run(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        var_dir=tmp_path,
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="queues.example.com",
        DJANGO_HTTPS="1",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "System check identified no issues" in out.stdout


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy_without_inline_script(admin_client):
    """The dashboard and the admin are served with a CSP that allows scripts only from the site itself (no ..."""
    # ... inline script, no eval) and no framing.
    for url in ("/queues/", "/admin/login/", "/admin/"):
        policy = admin_client.get(url)["Content-Security-Policy"]
        directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in policy.split(";") if d.strip())
        assert directives["script-src"] == "'self'", policy
        assert "frame-ancestors" in directives and directives["object-src"] == "'none'"
        assert "unsafe" not in policy


@pytest.mark.django_db
def test_dashboard_pages_and_api_answers_are_never_cached(admin_client):
    """Every dashboard page, action answer and refusal, and every HTTP API answer, says Cache-Control: private, ..."""
    # ... no-store; the public OpenAPI document may be cached.
    tid = Queue("t1").enqueue("secret payload")
    viewer = Client()
    viewer.force_login(User.objects.create_user("plain", password="pw", is_staff=True))
    answers = [
        admin_client.get(url)
        for url in ("/queues/", "/queues/q/t1/", f"/queues/task/{tid}/", "/queues/search/?q=secret", "/queues/q/nope/")
    ]
    answers.append(admin_client.post("/queues/q/t1/pause/", HTTP_ACCEPT="application/json"))
    answers.append(viewer.get("/queues/", HTTP_ACCEPT="application/json"))  # refused: 403
    api = Api(make_token("view_dashboard"))
    answers += [api.get(f"/api/tasks/{tid}"), api.get("/api/tasks/t1-0123456789abcdef"), Api().get("/api/queues")]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 404, 200, 403, 200, 404, 401]
    for answer in answers:
        directives = {d.strip() for d in answer.get("Cache-Control", "").split(",")}
        assert {"private", "no-store"} <= directives, (answer.status_code, answer.get("Cache-Control"))
    assert "no-store" not in Api().get("/api/openapi.json").get("Cache-Control", "")
