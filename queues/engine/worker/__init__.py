"""The worker runtime, in Sidekiq-sized pieces:

- ``launcher.Worker``: the worker's state, its lifecycle and shutdown;
- ``heartbeat.Heart``: registration (claiming the name) and the heartbeat;
- ``control.Listener``: the worker's control channel (wake-ups, hand-overs, cancels),
  resubscribing after every reconnect;
- ``fetch.Fetcher``: fills free slots, takes stock after reconnects, takes hand-overs;
- ``processor``: runs one delivery (sync handlers on threads, async ones on the loop) under its
  timeout and decides its outcome;
- ``reporter.Reporter``: sends outcomes to Redis (completions acknowledged in batches) and
  releases the locks kept for handlers that outlived their outcome;
- ``pool.ThreadPool``: daemon threads for sync handlers;
- ``procpool.ProcessPool``: isolated sync handlers, one pre-forked process per slot, forked by
  ``forkserver.ForkServer``; ``child`` is what runs in such a process;
- ``supervisor.Supervisor``: N worker processes under one command (``--processes N``).
"""

from .launcher import Worker

__all__ = ["Worker"]
