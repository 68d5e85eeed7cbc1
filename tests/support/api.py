"""The HTTP API's test helpers: tokens, a client that sends them, and the error body's checks."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from queues.models import ACTION_PERMISSIONS, ApiToken


def make_token(*codenames, name=None):
    """A token with the given permissions ("all": every action permission); returns the raw key."""
    codenames = list(ACTION_PERMISSIONS) if codenames == ("all",) else codenames
    perms = Permission.objects.filter(content_type__app_label="queues", codename__in=codenames)
    return ApiToken.create(name or f"t{ApiToken.objects.count()}", perms)[1]


class Api:
    """A Django test client that sends a bearer token and JSON bodies."""

    def __init__(self, raw=None, **client_kwargs):
        self.http = Client(**client_kwargs)
        self.headers = {"Authorization": f"Bearer {raw}"} if raw else {}

    def call(self, method, path, body=None, content_type="application/json", headers=None):
        data = body if isinstance(body, (str, bytes)) or body is None else json.dumps(body)
        return self.http.generic(
            method, path, data=data or "", content_type=content_type, headers={**self.headers, **(headers or {})}
        )

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, body=None, **kw):
        return self.call("POST", path, body, **kw)

    def delete(self, path):
        return self.call("DELETE", path)


@pytest.fixture
def hooks(settings):
    """Callbacks allowed to 127.0.0.1 and localhost in this process."""
    settings.WORQR = {**settings.WORQR, "CALLBACK_ALLOWED_HOSTS": ["127.0.0.1", "localhost"]}


def error(response, status, field=None):
    assert response.status_code == status, (response.status_code, response.content)
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    assert body.get("field") == field, body
    return body["error"]
