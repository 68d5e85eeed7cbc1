"""Test settings with an app whose tasks module has ``@handler("emails", concurrency=0)``: every
manage.py command that runs worqr's checks must stop with queues.E030 (tests/test_limits.py)."""

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.badhandlerapp"]  # noqa: F405
