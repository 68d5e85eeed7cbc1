-- A live worker's beat on one queue, which also does the queue's housekeeping:
--  1. pushes the worker's deadline out by the TTL (refused if the worker was reaped);
--  2. keeps the locks of the worker's tasks alive;
--  3. fails workers whose deadline passed: their tasks go back to the front;
--  4. takes tasks past timeout + grace from their (stuck) holders: a new lease fences the old
--     holder out, and the task goes back to the front, or to the failed set when out of
--     attempts;
--  5. frees the waiters of locks that expired without a release (a last-resort safety net).
-- Only due entries of sorted sets are read: nothing here scans.
-- Input: ARGV[3] worker, ARGV[4] heartbeat TTL ms, ARGV[5] lock TTL ms,
--        ARGV[6] default retries, ARGV[7] default backoff s, ARGV[8] backoff max s,
--        ARGV[9] jitter, ARGV[10] history size
-- Output: {status (1 ok, -1 the worker was reaped), workers reaped, tasks recovered}
-- Events: 'worker_failed' {w, ids}, 'recovered' {ids}
local worker, ttl, lock_ttl = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
if not rcall('ZSCORE', K.workers, worker) then return {-1, 0, 0} end
rcall('ZADD', K.workers, now + ttl, worker)

for _, id in ipairs(rcall('SMEMBERS', worker_tasks_key(worker))) do
  local f = rcall('HMGET', task_key(id), 'lk', 'l')
  if f[1] and rcall('GET', lock_key(f[1])) == id .. ':' .. f[2] then
    rcall('PEXPIRE', lock_key(f[1]), lock_ttl)
  end
end

local reaped = 0
for _, w in ipairs(rcall('ZRANGEBYSCORE', K.workers, '-inf', now, 'LIMIT', 0, 20)) do
  fail_worker(w, 'worker_failed')
  reaped = reaped + 1
end

local recovered = {}
for _, id in ipairs(rcall('ZRANGEBYSCORE', K.deadlines, '-inf', now, 'LIMIT', 0, 100)) do
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 'l', 's', 'lk', 'w', 'x', 'u', 'a', 'r')
  if f[2] ~= 'active' then
    rcall('ZREM', K.deadlines, id)
  else
    local requeue = not f[5] and tonumber(f[7] or '0') <= tonumber(f[8] or ARGV[6])
    leave_active(id, f[1], f[3], f[4], requeue)
    rcall('HINCRBY', tk, 'l', 1)
    if f[4] then rcall('PUBLISH', CONTROL .. f[4], 'c ' .. QUEUE .. ' ' .. id) end
    if f[5] then
      drop_cancelled(id, tk, f[6])
    elseif requeue then
      requeue_front(id, tk, false, f[6])
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
  local pttl = rcall('PTTL', lock_key(lk))
  if pttl < 0 then
    promote_waiter(lk)
    if rcall('LLEN', lock_wait_key(lk)) > 0 then rcall('ZADD', K.lockwaits, now + lock_ttl, lk) end
  else
    rcall('ZADD', K.lockwaits, now + pttl + 1, lk)
  end
end
return {1, reaped, #recovered}
