-- A worker starts serving the queue: it is recorded with a heartbeat deadline. A worker that
-- starts afresh under the name of one that died fails that one first (its tasks go back).
-- Keys: pending front delayed active deadlines stats meta workers idle unique lockwaits lockheads leases outbox batchruns
-- @include workers
-- Input: ARGV[3] worker, ARGV[4] heartbeat TTL ms, and the worker's timings for tasks handed to
--   it by enqueue: ARGV[5] lock TTL ms, ARGV[6] timeout grace ms, ARGV[7] default timeout s;
--   ARGV[8] '1' if this is a new process (not a live worker registering again)
-- Output: number of tasks of an earlier worker of that name put back
-- Events: 'worker_failed' (for the earlier one), 'worker_joined' {w}
local worker, ttl = ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local requeued = 0
if ARGV[8] == '1' and rcall('ZSCORE', K.workers, worker) then
  requeued = fail_worker(worker, 'worker_failed', now)
end
rcall('ZADD', K.workers, now + ttl, worker)
rcall('HSET', K.meta, 'lt', ARGV[5], 'gr', ARGV[6], 'dt', ARGV[7])
publish({e = 'worker_joined', w = worker})
return requeued
