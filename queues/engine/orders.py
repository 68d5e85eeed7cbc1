"""Orders to one worker from outside (the dashboard): go quiet (take no more tasks, finish those
running) or stop (as SIGTERM: take no more, let running tasks finish within the grace, exit 0).
Sent over the worker's control channel (``keys.worker_channel``), as cancels are."""

from . import keys

#: order -> what the worker's control channel reads (``worker.launcher.Worker.on_control``)
ORDERS = {"quiet": b"q", "stop": b"s"}


def tell_worker(client, name, order):
    """Send ``order`` ("quiet" or "stop") to the worker ``name``. Nothing is returned: PUBLISH's
    count of receivers is only the node's on a Redis Cluster (the message reaches every node),
    so it cannot say whether the worker heard; its heartbeat shows it (quiet) or its going (stop)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    client.publish(keys.worker_channel(name), ORDERS[order])
