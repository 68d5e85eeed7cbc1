-- A worker starts serving the queue: it is recorded with a heartbeat deadline, and its
-- registration counts as a beat of the queue's clock (``note_beat``: after a gap, or in a queue
-- that never had a beat, no deadline is judged for a TTL). A worker that starts afresh under
-- the name of one that died fails that one first (its tasks go back).
-- Keys: pending front delayed active deadlines stats meta workers idle unique lockwaits lockheads leases outbox batchruns limits starts partitions ring pactive pwait
-- @include workers
-- @include beats
-- Input: ARGV[3] worker, ARGV[4] heartbeat TTL ms, and the worker's timings for tasks handed to
--   it by enqueue: ARGV[5] lock TTL ms, ARGV[6] timeout grace ms, ARGV[7] default timeout s;
--   ARGV[8] '1' if this is a new process (not a live worker registering again); its handler's
--   limits, each '' for none: ARGV[9] concurrency, ARGV[10] rate starts, ARGV[11] rate window ms,
--   ARGV[12] partition concurrency, ARGV[13] partition rate starts, ARGV[14] its window ms
--   (the limits in force follow, unless an operator's override holds); ARGV[15] the gap ms of
--   the heartbeat's clock (HEARTBEAT_TTL minus HEARTBEAT_INTERVAL)
-- Output: number of tasks of an earlier worker of that name put back
-- Events: 'worker_failed' (for the earlier one), 'worker_joined' {w}
local worker, ttl = ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local requeued = 0
if ARGV[8] == '1' and rcall('ZSCORE', K.workers, worker) then
  requeued = fail_worker(worker, 'worker_failed', now)
end
rcall('ZADD', K.workers, now + ttl, worker)
note_beat(now, ttl, tonumber(ARGV[15]))
rcall('HSET', K.meta, 'lt', ARGV[5], 'gr', ARGV[6], 'dt', ARGV[7])
local changed = false
for i, name in ipairs(LIMIT_FIELDS) do
  local v = ARGV[8 + i]
  if v ~= (rcall('HGET', K.limits, 'h' .. name) or '') then
    changed = true
    if v == '' then rcall('HDEL', K.limits, 'h' .. name) else rcall('HSET', K.limits, 'h' .. name, v) end
  end
end
if changed then  -- a deploy that raised a partition concurrency lets parked partitions run
  settle_limits()
  if unpark_partitions() > 0 then wake(math.min(rcall('SCARD', K.idle), listed_runnable(), (queue_room(now)))) end
end
publish({e = 'worker_joined', w = worker})
return requeued
