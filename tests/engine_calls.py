"""Drive the engine's scripts directly (no worker process), through its call layer."""

from queues.engine import commands

LOCK_TTL, GRACE = 35.0, 1.0


def register(client, queue, worker="w", ttl=3.0):
    commands.register(queue, worker, ttl=ttl, lock_ttl=LOCK_TTL, grace=GRACE, default_timeout=0, fresh=False).run(
        client
    )


def take(client, queue, worker="w", count=1, register_first=True):
    """Register ``worker`` (unless told not to) and take up to ``count`` tasks: [Task]."""
    if register_first:
        register(client, queue, worker)
    return (
        commands.start(queue, worker, count, lock_ttl=LOCK_TTL, grace=GRACE, default_timeout=0, result_ttl=60)
        .run(client)
        .tasks
    )


def fail(client, task, error="E: boom", worker="w", history=100, retries=0, handler=""):
    return commands.fail(
        task.queue,
        worker,
        task.id,
        task.lease,
        error,
        "tb",
        retries=retries,
        backoff=1,
        backoff_max=10,
        jitter=0,
        history=history,
        handler=handler,
    ).run(client)


def finish(client, task, worker="w", result=""):
    return commands.finish(task.queue, worker, [(task.id, task.lease, result, False)], result_ttl=60).run(client)[0]
