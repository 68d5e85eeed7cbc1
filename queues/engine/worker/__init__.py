"""The worker runtime, in Sidekiq-sized pieces:

- ``launcher.Worker``: makes the pieces, each given only its collaborators, and runs the
  worker's lifecycle; ``shutdown`` is how it leaves;
- ``capsule``: what the pieces share: ``Capsule`` (what the worker serves and how) and
  ``Status`` (stopping, registered, the events they wait on);
- ``delivery``: ``Delivery`` (one lease of a task, its life one ``State``, changed only through
  its methods) and ``Deliveries``, the table of what the worker holds;
- ``heartbeat.Heart``: registration (claiming the name) and the heartbeat;
- ``duties``: the periodic duties done beside the heartbeat, one module each (gone workers,
  depth samples, the queue sweep, the outbox sweep, the Sentinel master check);
- ``control.Listener``: the worker's control channel (wake-ups, hand-overs, cancels),
  resubscribing after every reconnect;
- ``fetch.Fetcher``: fills free slots, takes stock after reconnects, takes hand-overs;
- ``processor.Processor``: runs a delivery (sync handlers on threads, async ones on the loop)
  under its timeout and decides its outcome;
- ``reporter.Reporter``: sends outcomes to Redis (completions acknowledged in batches) and
  releases the locks kept for handlers that outlived their outcome;
- ``progress.ProgressSink``: carries what handlers report to Redis; ``linker.Linker``: tells
  children and batches that tasks ended; ``scheduler.Scheduler``: fires the schedules' ticks;
- ``pool.ThreadPool``: daemon threads for sync handlers;
- ``procpool.ProcessPool``: isolated sync handlers, one pre-forked process per slot, forked by
  ``forkserver.ForkServer``; ``child`` is what runs in such a process;
- ``supervisor.Supervisor``: N worker processes under one command (``--processes N``).
"""

from .launcher import Worker

__all__ = ["Worker"]
