"""The demo worker's settings (``make demo``): the project's, plus two schedules, so that the
Schedules page has something on it. Only the demo's worker uses them (schedules are synced to
Redis at a worker's start); the project and its tests keep none."""

from worqr_site.settings import *  # noqa: F403

WORQR = {
    **WORQR,  # noqa: F405
    "SCHEDULES": {
        "ping": {"queue": "default", "every": 15, "payload": "ping"},
        "nightly-report": {"queue": "reports", "cron": "0 3 * * *", "payload": "acme:nightly"},
    },
}
