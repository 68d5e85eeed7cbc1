"""The dashboard's browser tests' fixtures: a real Daphne, a logged-in operator committed to the
session's database, a Chromium page that collects Content-Security-Policy violations, screenshots."""

import pytest
from django.contrib.auth.models import Permission, User
from playwright import sync_api as playwright_api

from tests.browser import DaphneServer, launch_chromium
from tests.conftest import ARTIFACTS

WAIT = 20_000  # ms: generous, for a slow shared machine


@pytest.fixture
def operator(transactional_db):
    """Committed to the session's database file, so the Daphne process sees it."""
    user = User.objects.create_user("operator", password="secret-pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="queues"))
    return user


def login(page, url, username="operator", password="secret-pw"):
    """Open ``url`` (the login page comes first) and sign in as ``operator``."""
    page.goto(url)
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")


@pytest.fixture
def server():
    daphne = DaphneServer()
    try:
        yield daphne.wait_ready()
    finally:
        daphne.stop()


#: Reports every Content-Security-Policy violation of a page as a console error.
REPORT_CSP = """document.addEventListener("securitypolicyviolation", (e) =>
  console.error("CSP violation: " + e.violatedDirective + " blocked " + (e.blockedURI || "inline")));"""


@pytest.fixture
def page(server):
    """A page of a fresh browser context; ``page.csp_violations`` collects what the
    Content-Security-Policy blocked in any page of the context."""
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(WAIT)
        violations = []
        context.add_init_script(REPORT_CSP)
        context.on(
            "console",
            lambda msg: (
                msg.type == "error"
                and ("CSP violation" in msg.text or "Content Security Policy" in msg.text)
                and violations.append(msg.text)
            ),
        )
        try:
            page = context.new_page()
            page.csp_violations = violations
            yield page
        finally:
            context.close()
            browser.close()


def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"), full_page=True)
