"""Test settings for worker processes with schedules: ``WORQR["SCHEDULES"]`` is the JSON in
``$WORQR_TEST_SCHEDULES`` (absent: no SCHEDULES key, so the worker leaves Redis's schedules alone)."""

import json
import os

from tests.settings import *  # noqa: F403

if "WORQR_TEST_SCHEDULES" in os.environ:
    WORQR = dict(WORQR, SCHEDULES=json.loads(os.environ["WORQR_TEST_SCHEDULES"]))  # noqa: F405
