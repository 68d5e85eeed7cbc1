"""API tokens: the ``api_token`` command and the admin (created, shown once, stored hashed,
revoked)."""

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from queues.models import ApiToken, hash_token
from tests.test_api import Api

pytestmark = pytest.mark.django_db


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("api_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_prints_the_token_once_and_stores_only_its_hash():
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
    raw = run("create", "gone", "--perm", "all")[0].strip()
    assert Api(raw).get("/api/queues").status_code == 200
    assert run("revoke", "gone")[0].strip() == "revoked gone"
    assert Api(raw).get("/api/queues").status_code == 401
    assert "revoked" in run("list")[0]


def test_bad_command_input_is_a_command_error():
    with pytest.raises(CommandError, match="unknown permission"):
        run("create", "x", "--perm", "superpowers")
    run("create", "dup")
    with pytest.raises(CommandError, match="exists already"):
        run("create", "dup")
    with pytest.raises(CommandError, match="no token"):
        run("revoke", "nobody")
    assert "no permission" in run("create", "bare")[1]


def test_admin_creates_a_token_and_shows_it_once(admin_client):
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
