"""``manage.py chaos``: a chaos soak of worqr's guarantees (``queues.chaos.run``), with its tools:
a TCP proxy between the processes and Redis (``proxy``), the producers (``producer``) and the
handler of the soak's queue (``handler``, registered in workers started by the soak only)."""

#: The queue the soak's tasks go to.
QUEUE = "worqr-chaos"
#: Its ledger: one row per task id whose transaction committed (written in that transaction).
LEDGER = "worqr_chaos_ledger"
