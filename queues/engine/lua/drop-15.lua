-- Drop up to `limit` tasks of the queue, then, when none is left, every key of the queue.
-- Workers holding its tasks are told to stop them. Callers loop until it returns 0.
-- Input: ARGV[3] limit
-- Output: tasks still left (0 when the queue is gone)
-- Events: 'dropped' once at the end
local limit = tonumber(ARGV[3])
local dropped = 0
local function drop_ids(ids)
  for _, id in ipairs(ids) do
    rcall('UNLINK', task_key(id))
    dropped = dropped + 1
  end
end
for _, id in ipairs(rcall('ZRANGE', K.active, 0, -1)) do
  local f = rcall('HMGET', task_key(id), 'w', 'lk')
  if f[1] then rcall('PUBLISH', CONTROL .. f[1], 'c ' .. QUEUE .. ' ' .. id) end
  if f[2] then rcall('DEL', lock_key(f[2])) end
end
for _, lk in ipairs(rcall('ZRANGE', K.lockwaits, 0, -1)) do
  drop_ids(rcall('LRANGE', lock_wait_key(lk), 0, -1))
  rcall('DEL', lock_wait_key(lk), lock_key(lk))
end
rcall('DEL', K.lockwaits)
for _, kind in ipairs({'delayed', 'active', 'failed', 'results'}) do
  local ids = rcall('ZRANGE', K[kind], 0, limit - 1)
  drop_ids(ids)
  if #ids > 0 then rcall('ZREM', K[kind], unpack(ids)) end
  if dropped >= limit then return 1 end
end
local ids = rcall('LPOP', K.pending, limit - dropped)
if ids then drop_ids(ids) end
if rcall('LLEN', K.pending) > 0 then return 1 end
for _, w in ipairs(rcall('ZRANGE', K.workers, 0, -1)) do rcall('DEL', worker_tasks_key(w)) end
rcall('UNLINK', K.pending, K.delayed, K.active, K.deadlines, K.failed, K.failures, K.stats,
  K.throughput, K.meta, K.workers, K.idle, K.unique, K.lockwaits, K.results, K.durations)
publish({e = 'dropped'})
return 0
