"""The worker runtime, in Sidekiq-sized pieces:

- ``launcher.Worker``: registration, heartbeat, the fetch loop, shutdown;
- ``control.Listener``: the worker's control channel (wake-ups, cancels), resubscribing after
  every reconnect;
- ``processor``: runs one delivery (sync handlers on threads, async ones on the loop) under its
  timeout and decides its outcome;
- ``reporter.Reporter``: sends outcomes to Redis (completions acknowledged in batches);
- ``pool.ThreadPool``: daemon threads for sync handlers.
"""

from .launcher import Worker

__all__ = ["Worker"]
