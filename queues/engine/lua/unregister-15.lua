-- A worker stops serving the queue (or a dead worker is failed from outside): every task it
-- still holds in this queue goes back to the front, and it leaves the queue's worker sets.
-- Input: ARGV[3] worker, ARGV[4] event name ('worker_left' or 'worker_failed')
-- Output: number of tasks requeued
-- Events: ARGV[4] {w, ids, n}
return fail_worker(ARGV[3], ARGV[4])
