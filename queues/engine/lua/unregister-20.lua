-- A worker stops serving the queue (or a dead worker is failed from outside): every task it
-- still holds in this queue goes back first in line, the locks it kept are released, and it
-- leaves the queue's worker sets.
-- Keys: pending front delayed active deadlines stats workers idle unique lockwaits lockheads leases outbox batchruns limits starts partitions ring pactive pwait
-- @include workers
-- Input: ARGV[3] worker, ARGV[4] event name ('worker_left' or 'worker_failed')
-- Output: number of tasks requeued
-- Events: ARGV[4] {w, ids, n}
return fail_worker(ARGV[3], ARGV[4], now_ms())
