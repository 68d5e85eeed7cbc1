-- A live worker's beat on one queue, which also does the queue's housekeeping, each step
-- bounded (only due entries of sorted sets are read; nothing here scans):
--  1. pushes the worker's deadline out by the TTL (refused if the worker was reaped);
--  2. keeps the locks of the worker's tasks alive, and those it keeps for handlers still
--     running after their outcome was recorded (their kept slots need nothing);
--  3. fails up to 20 workers whose deadline passed: their tasks go back first in line;
--  4. takes up to 100 tasks past timeout + grace from their (stuck) holders: a new lease fences
--     the old holder out, and the task goes back first in line, or to the failed set when out
--     of attempts; a holder still alive keeps the lock until it says the handler stopped;
--  5. looks at up to 20 locks with waiters that nothing freed (a last-resort safety net).
-- Deadlines (steps 3 and 4) are judged only by time the queue's workers could beat in
-- (``note_beat``): after a gap in the queue's beats, none for a full TTL, in which every live
-- worker beats again; only a worker that does not is failed after it.
-- Keys: pending front delayed active deadlines failed failures stats throughput meta workers idle unique lockwaits lockheads durations leases outbox batchruns limits starts partitions ring pactive pwait
-- @include workers
-- @include failure
-- @include beats
-- Input: ARGV[3] worker, ARGV[4] heartbeat TTL ms, ARGV[5] lock TTL ms,
--   ARGV[6] default retries, ARGV[7] default backoff s, ARGV[8] backoff max s,
--   ARGV[9] jitter, ARGV[10] history size, ARGV[11] the gap ms (HEARTBEAT_TTL minus
--   HEARTBEAT_INTERVAL: beats of live workers come closer than that while they can)
-- Output: {OK or NOT_REGISTERED (the worker was reaped), workers reaped, tasks recovered}
-- Events: 'worker_failed' {w, ids}, 'recovered' {ids}
local worker, ttl, lock_ttl = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
if not rcall('ZSCORE', K.workers, worker) then return {@@NOT_REGISTERED@@, 0, 0} end
rcall('ZADD', K.workers, now + ttl, worker)
local judging = note_beat(now, ttl, tonumber(ARGV[11]))

for _, id in ipairs(rcall('SMEMBERS', worker_tasks_key(worker))) do
  local f = rcall('HMGET', task_key(id), 'lk', 'l')
  if f[1] and rcall('GET', lock_key(f[1])) == id .. ':' .. f[2] then
    rcall('PEXPIRE', lock_key(f[1]), lock_ttl)
  end
end
local hk = held_key(worker)
local held = rcall('HGETALL', hk)
for i = 1, #held, 2 do
  if held[i + 1] ~= '' then  -- '': slots kept, no lock
    if rcall('GET', lock_key(held[i + 1])) == held[i] then
      rcall('PEXPIRE', lock_key(held[i + 1]), lock_ttl)
    elseif rcall('HEXISTS', KEPT, held[i]) == 1 then
      rcall('HSET', hk, held[i], '')  -- the lock is lost, the slots still kept
    else
      rcall('HDEL', hk, held[i])
    end
  end
end

local reaped = 0
local due = judging and now or '-inf'  -- '-inf': none is due
for _, w in ipairs(rcall('ZRANGEBYSCORE', K.workers, '-inf', due, 'LIMIT', 0, 20)) do
  fail_worker(w, 'worker_failed', now)
  reaped = reaped + 1
end

local recovered = {}
for _, id in ipairs(rcall('ZRANGEBYSCORE', K.deadlines, '-inf', due, 'LIMIT', 0, 100)) do
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 'l', 's', 'lk', 'w', 'x', 'u', 'a', 'r')
  if f[2] ~= 'active' then
    rcall('ZREM', K.deadlines, id)
  else
    local requeue = not f[5] and tonumber(f[7] or '0') <= tonumber(f[8] or ARGV[6])
    local mode = 'release'
    if f[4] and rcall('ZSCORE', K.workers, f[4]) then mode = 'keep' elseif requeue then mode = 'requeue' end
    leave_active(id, f[1], f[3], f[4], mode, now)
    rcall('HSET', tk, 'l', new_lease())
    -- with the lease it had: a holder that runs no such delivery releases what was kept for it
    if f[4] then rcall('PUBLISH', CONTROL .. f[4], 'c ' .. QUEUE .. ' ' .. id .. ' ' .. f[1]) end
    if f[5] then
      requeue_front(id, tk, true, f[6], f[3], now)
    elseif requeue then
      requeue_front(id, tk, false, f[6], f[3], now)
      recovered[#recovered + 1] = id
    else
      record_failure(id, tk, now, {
        error = 'TaskTimeout: still running past its timeout and grace; taken from ' .. (f[4] or '?'),
        traceback = '', worker = f[4], retries = tonumber(ARGV[6]), backoff = tonumber(ARGV[7]),
        backoff_max = tonumber(ARGV[8]), jitter = tonumber(ARGV[9]), hist = tonumber(ARGV[10]),
      })
    end
  end
end
if #recovered > 0 then
  publish({e = 'recovered', ids = recovered, n = #recovered})
  wake(#recovered)
end

for _, lk in ipairs(rcall('ZRANGEBYSCORE', K.lockwaits, '-inf', now, 'LIMIT', 0, 20)) do
  if promote_waiter(lk, now) == 0 and rcall('ZSCORE', K.lockwaits, lk) then
    local at = now + lock_ttl  -- a runnable head will take the lock (and free it) in its turn
    if rcall('EXISTS', lock_key(lk)) == 1 then at = recheck_at(lk, now)
    elseif rcall('HEXISTS', K.lockheads, lk) == 0 then at = now + 1000 end
    rcall('ZADD', K.lockwaits, at, lk)
  end
end
return {@@OK@@, reaped, #recovered}
