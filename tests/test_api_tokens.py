"""API tokens: the ``api_token`` command and the admin (created, shown once, stored hashed,
revoked)."""

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from queues import Queue
from queues.models import ApiToken, hash_token
from tests.support.api import Api

pytestmark = pytest.mark.django_db


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("api_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_prints_the_token_once_and_stores_only_its_hash():
    """api_token create prints the key once and stores only its hash, with the permissions given."""
    out, _ = run("create", "ci", "--perm", "enqueue_task", "--perm", "view_dashboard")
    raw = out.strip()
    assert re.fullmatch(r"wq_[A-Za-z0-9_-]{40,}", raw)
    token = ApiToken.objects.get(name="ci")
    assert token.key_hash == hash_token(raw) and raw not in (token.key_hash, token.prefix)
    assert sorted(p.codename for p in token.permissions.all()) == ["enqueue_task", "view_dashboard"]
    api = Api(raw)
    assert api.post("/api/tasks", {"queue": "t1", "payload": "x"}).status_code == 201
    assert api.post("/api/queues/t1/pause").status_code == 403
    listing, _ = run("list")
    assert "ci\t" + token.prefix in listing and "enqueue_task,view_dashboard" in listing and raw not in listing


def test_revoke_stops_the_token_at_once():
    """A revoked token is refused on its next request."""
    raw = run("create", "gone", "--perm", "all")[0].strip()
    assert Api(raw).get("/api/queues").status_code == 200
    assert run("revoke", "gone")[0].strip() == "revoked gone"
    assert Api(raw).get("/api/queues").status_code == 401
    assert "revoked" in run("list")[0]


def test_bad_command_input_is_a_command_error():
    """Unknown permissions, duplicate names and unknown tokens are CommandErrors."""
    with pytest.raises(CommandError, match="unknown permission"):
        run("create", "x", "--perm", "superpowers")
    run("create", "dup")
    with pytest.raises(CommandError, match="exists already"):
        run("create", "dup")
    with pytest.raises(CommandError, match="no token"):
        run("revoke", "nobody")
    assert "no permission" in run("create", "bare")[1]


def test_admin_creates_a_token_and_shows_it_once(admin_client):
    """A token created in the admin works and its key is shown once, on the page, never in a cookie."""
    from django.contrib.auth.models import Permission

    perm = Permission.objects.get(content_type__app_label="queues", codename="view_dashboard")
    page = admin_client.get("/admin/queues/apitoken/add/")
    assert page.status_code == 200
    assert b"Can view the queues dashboard" in page.content and b"Can view audit log" not in page.content
    r = admin_client.post("/admin/queues/apitoken/add/", {"name": "from-admin", "permissions": [perm.pk]}, follow=True)
    assert r.status_code == 200
    raw = re.search(rb"wq_[A-Za-z0-9_-]{40,}", r.content).group().decode()
    token = ApiToken.objects.get(name="from-admin")
    assert token.key_hash == hash_token(raw) and token.prefix == raw[:8]
    assert Api(raw).get("/api/queues").status_code == 200
    again = admin_client.get(f"/admin/queues/apitoken/{token.pk}/change/")
    assert raw.encode() not in again.content
    admin_client.post("/admin/queues/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert ApiToken.objects.get(name="from-admin").revoked
    assert Api(raw).get("/api/queues").status_code == 401


def _cookie_texts(response):
    """What anyone holding the response's cookies can read in them, without any secret: each
    value, and its signed payload decoded (base64, zlib-compressed when it starts with '.')."""
    import zlib

    from django.core.signing import b64_decode

    texts = []
    for morsel in response.cookies.values():
        texts.append(morsel.value)
        payload = morsel.value.split(":")[0]
        try:
            raw = b64_decode(payload.lstrip(".").encode())
            texts.append((zlib.decompress(raw) if payload.startswith(".") else raw).decode("utf-8", "replace"))
        except Exception:  # not a signed value
            pass
    return texts


def test_the_new_key_is_shown_once_on_a_page_and_never_put_in_a_cookie(admin_client):
    """Creating a token in the admin answers with a page showing the key (not cached), and no cookie of that ..."""
    # ... answer, or of the pages after it, carries the key.
    from django.contrib.auth.models import Permission

    perm = Permission.objects.get(content_type__app_label="queues", codename="view_dashboard")
    r = admin_client.post("/admin/queues/apitoken/add/", {"name": "shown-once", "permissions": [perm.pk]})
    assert r.status_code == 200 and "no-store" in r["Cache-Control"]
    raw = re.search(r"wq_[A-Za-z0-9_-]{40,}", r.content.decode()).group()
    assert ApiToken.objects.get(name="shown-once").key_hash == hash_token(raw)
    assert not any(raw in text for text in _cookie_texts(r))
    later = admin_client.get("/admin/queues/apitoken/")
    assert raw not in later.content.decode() and not any(raw in text for text in _cookie_texts(later))


def test_admin_grants_only_the_permissions_the_user_holds(django_user_model):
    """A staff user allowed to manage tokens but not to pause queues cannot make (or change) a token that pauses ..."""
    # ... queues; the permissions they hold they may grant.
    from django.contrib.auth.models import Permission
    from django.test import Client

    def perm(codename):
        return Permission.objects.get(content_type__app_label="queues", codename=codename)

    user = django_user_model.objects.create_user("tokens", password="pw", is_staff=True)
    user.user_permissions.set(
        [perm("add_apitoken"), perm("change_apitoken"), perm("view_apitoken"), perm("view_dashboard")]
    )
    web = Client()
    web.force_login(user)
    form = web.get("/admin/queues/apitoken/add/").content.decode()
    assert "Can view the queues dashboard" in form and "Can pause and resume queues" not in form
    r = web.post("/admin/queues/apitoken/add/", {"name": "escalate", "permissions": [perm("pause_queue").pk]})
    assert r.status_code == 200 and "queues.pause_queue" in r.content.decode()
    assert not ApiToken.objects.filter(name="escalate").exists()

    r = web.post("/admin/queues/apitoken/add/", {"name": "reader", "permissions": [perm("view_dashboard").pk]})
    raw = re.search(r"wq_[A-Za-z0-9_-]{40,}", r.content.decode()).group()
    token = ApiToken.objects.get(name="reader")
    r = web.post(
        f"/admin/queues/apitoken/{token.pk}/change/",
        {"name": "reader", "permissions": [perm("view_dashboard").pk, perm("pause_queue").pk]},
    )
    assert r.status_code == 200 and "queues.pause_queue" in r.content.decode()
    assert [p.codename for p in token.permissions.all()] == ["view_dashboard"]
    Queue("t1").enqueue("x")
    assert Api(raw).post("/api/queues/t1/pause").status_code == 403 and not Queue("t1").is_paused()


def test_revocation_is_final_for_a_token_admin_a_superuser_and_the_database(django_user_model, admin_client):
    """A token admin who unticks "revoked" on an all-permissions token (a crafted post) is refused; so is a ..."""
    # ... superuser; the admin shows the token read-only and says revocation is final; saving it unrevoked raises,
    # and even the field set back in the database revives no key (its hash is gone).
    from django.contrib.auth.models import Permission
    from django.test import Client

    raw = run("create", "root", "--perm", "all")[0].strip()
    token = ApiToken.objects.get(name="root")
    assert (
        admin_client.post("/admin/queues/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}).status_code
        == 302
    )
    assert Api(raw).get("/api/queues").status_code == 401
    perms = Permission.objects.filter(
        content_type__app_label="queues",
        codename__in=["add_apitoken", "change_apitoken", "view_apitoken", "view_dashboard"],
    )
    tokens_admin = django_user_model.objects.create_user("tokens", password="pw", is_staff=True)
    tokens_admin.user_permissions.set(perms)
    web = Client()
    web.force_login(tokens_admin)
    url = f"/admin/queues/apitoken/{token.pk}/change/"
    for who in (web, admin_client):
        r = who.post(url, {"name": "root", "permissions": [p.pk for p in token.permissions.all()]})
        assert Api(raw).get("/api/queues").status_code == 401 and ApiToken.objects.get(pk=token.pk).revoked
        assert r.status_code == 403, r.status_code
    page = web.get(url).content.decode()
    assert "revoked, for good" in page and 'name="revoked"' not in page
    token.refresh_from_db()
    token.revoked = False
    with pytest.raises(ValueError, match="revocation is final"):
        token.save()
    ApiToken.objects.filter(pk=token.pk).update(revoked=False)
    assert Api(raw).get("/api/queues").status_code == 401


def test_a_token_revoked_by_ticking_the_box_loses_its_key_for_good(admin_client):
    """Revoking in the change form (or with the command) replaces the key's hash: set back, the key stays dead."""
    for name, revoke in (
        (
            "boxed",
            lambda t: admin_client.post(f"/admin/queues/apitoken/{t.pk}/change/", {"name": t.name, "revoked": "on"}),
        ),
        ("commanded", lambda t: run("revoke", t.name)),
    ):
        raw = run("create", name, "--perm", "view_dashboard")[0].strip()
        revoke(ApiToken.objects.get(name=name))
        token = ApiToken.objects.get(name=name)
        assert token.revoked and token.key_hash != hash_token(raw)
        ApiToken.objects.filter(pk=token.pk).update(revoked=False)
        assert Api(raw).get("/api/queues").status_code == 401
