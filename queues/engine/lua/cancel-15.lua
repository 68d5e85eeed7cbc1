-- Cancel a task. Pending, delayed or waiting: removed at once and never run. In process: the
-- task is marked, and the worker holding it is told over its control channel; that worker
-- stops it and its outcome is discarded (finish/fail/stop then drop it as cancelled).
-- Input: ARGV[3] id
-- Output: 1 removed, 2 being stopped, 0 unknown, -1 failed (use delete)
-- Events: 'cancelled' {ids} | 'cancelling' {ids, w}
local id = ARGV[3]
local tk = task_key(id)
local f = rcall('HMGET', tk, 's', 'w')
if not f[1] then return 0 end
if f[1] == 'active' then
  rcall('HSET', tk, 'x', 1)
  if f[2] then rcall('PUBLISH', CONTROL .. f[2], 'c ' .. QUEUE .. ' ' .. id) end
  publish({e = 'cancelling', ids = {id}, w = f[2]})
  return 2
end
if f[1] == 'failed' or f[1] == 'completed' then return -1 end
remove_inactive(id)
rcall('HINCRBY', K.stats, 'cancelled', 1)
publish({e = 'cancelled', ids = {id}, n = 1})
return 1
