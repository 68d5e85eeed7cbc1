"""``manage.py chaos``: a chaos soak of worqr's guarantees (``run``), with its tools: a TCP proxy
between the processes and Redis (``proxy``, the fault tests' too), the producers (``producer``)
and the handler of the soak's queue (``handler``, registered in workers started by the soak only).

A development tool of this repository, not part of the worqr package: a Django app that only the
project's own settings install (``worqr_site/settings.py``), so ``manage.py chaos`` is in this
project's ``manage.py help`` and in no project that installs worqr."""

#: The queue the soak's tasks go to.
QUEUE = "worqr-chaos"
#: Its ledger: one row per task id whose transaction committed (written in that transaction).
LEDGER = "worqr_chaos_ledger"
#: A one-row table each producer's batch writes first: the write lock it takes (a row lock in
#: PostgreSQL, the database's in SQLite) makes the count of the ledger and the batch one step, so
#: two producers never both fill the same remainder.
LEDGER_TURN = "worqr_chaos_ledger_turn"
