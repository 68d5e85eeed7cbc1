"""schemathesis against the served /api/openapi.json, on the real API (Django's WSGI app, the
test session's Redis) with a token holding every permission, in two runs of fixed seeds:

- requests valid by the document: none may fail with a 5xx or be refused with 400 (but for a
  callback host: the allow-list is the server's and is not published), and every answer must
  have a documented status, content type and shape;
- requests that break the document (wrong types, missing and unknown fields, values out of
  range, bad JSON): none may fail with a 5xx. The run's count is kept in
  test-artifacts/schemathesis.txt."""

import pytest
import schemathesis
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.test import override_settings
from hypothesis import HealthCheck
from hypothesis import settings as settings_for_hypothesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import ARTIFACTS
from tests.support.api import make_token

pytestmark = pytest.mark.django_db(transaction=True)

#: An allow-list with every kind of entry, so that callbacks are on and checked.
CALLBACK_HOSTS = ["hooks.example.com", ".example.org:8443", "127.0.0.1", "10.0.0.0/8", "[::1]:9000", "*"]
WORQR = {**settings.WORQR, "CALLBACK_ALLOWED_HOSTS": CALLBACK_HOSTS}
#: Requests of the negative run: at least this many in all (a run that made none proves nothing).
NEGATIVE_MIN = 500


def _schema(mode, examples):
    config = schemathesis.Config.from_dict(
        {
            "generation": {"mode": mode, "max-examples": examples, "deterministic": True},
            "phases": {"stateful": {"enabled": False}},
        }
    )
    with override_settings(WORQR=WORQR):  # the document as served with that allow-list
        return schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application(), config=config)


positive, negative = _schema("positive", 25), _schema("negative", 40)
_HYPOTHESIS = settings_for_hypothesis(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
)
_SENT = {"requests": 0, "server errors": 0}


@pytest.fixture
def token(settings):
    settings.WORQR = WORQR
    return make_token("all", name="schemathesis")


@positive.parametrize()
@_HYPOTHESIS
def test_requests_valid_by_the_document_are_accepted(case, token):
    """No request the document calls valid is refused (400, but for a callback's host, a cron or a time zone) or fails (5xx)."""
    # ... and every answer matches the document.
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    if response.status_code == 400:  # a callback's host; a schedule's cron or time zone (not expressible)
        assert response.json().get("field") in ("callback", "cron", "timezone"), (
            case.method,
            case.formatted_path,
            case.body,
            response.text,
        )
    case.validate_response(
        response,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )


@negative.parametrize()
@_HYPOTHESIS
def test_requests_that_break_the_document_never_fail_with_a_server_error(case, token):
    """Requests the document calls invalid (types, ranges, fields, bodies) get a 4xx, never a 5xx."""
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    _SENT["requests"] += 1
    _SENT["server errors"] += response.status_code >= 500
    case.validate_response(response, checks=[not_a_server_error])


def test_the_negative_run_sent_enough_requests():
    """The negative run above sent requests to every operation (a run that sent few proves little)."""
    # Its count is kept in test-artifacts/schemathesis.txt.
    if not _SENT["requests"]:
        pytest.skip("the negative run was not selected")
    ARTIFACTS.mkdir(exist_ok=True)
    summary = f"schemathesis negative run: {_SENT['requests']} requests, {_SENT['server errors']} server errors\n"
    (ARTIFACTS / "schemathesis.txt").write_text(summary)
    assert _SENT["requests"] >= NEGATIVE_MIN and _SENT["server errors"] == 0, _SENT
