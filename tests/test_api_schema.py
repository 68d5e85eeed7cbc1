"""schemathesis against the served /api/openapi.json: requests generated from the document
(positive ones only: valid by its schemas) are sent to the real API (Django's WSGI app, the
test session's Redis) with a token holding every permission. None may fail with a 5xx or be
refused with 400, and every answer must have a documented status, content type and shape."""

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

from tests.test_api import make_token

pytestmark = pytest.mark.django_db(transaction=True)

#: An allow-list with every kind of entry, so that the callback pattern is exercised too.
CALLBACK_HOSTS = ["hooks.example.com", ".example.org:8443", "127.0.0.1", "10.0.0.0/8", "[::1]:9000", "*"]
WORQR = {**settings.WORQR, "CALLBACK_ALLOWED_HOSTS": CALLBACK_HOSTS}
CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {"mode": "positive", "max-examples": 25, "deterministic": True},
        "phases": {"stateful": {"enabled": False}},
    }
)

with override_settings(WORQR=WORQR):  # the document as served with that allow-list
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application(), config=CONFIG)


@pytest.fixture
def token(settings):
    settings.WORQR = WORQR
    return make_token("all", name="schemathesis")


@schema.parametrize()
@settings_for_hypothesis(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None
)
def test_requests_valid_by_the_document_are_accepted(case, token):
    """No request the document calls valid is refused (400) or fails (5xx); answers match it."""
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    assert response.status_code != 400, (case.method, case.formatted_path, case.body, response.text)
    case.validate_response(
        response,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
