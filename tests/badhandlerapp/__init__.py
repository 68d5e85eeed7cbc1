"""An app whose tasks module declares a bad handler option (tests/test_limits.py: the system
check queues.E030 stops manage.py at start-up). Installed only by tests/settings_badhandler.py."""
