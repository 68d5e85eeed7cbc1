-- Cancel a task. Pending, delayed, waiting or blocked: removed at once (O(1)) and never run. Active: the
-- task is marked, and the worker holding it is told over its control channel; that worker stops
-- it and its outcome is discarded (finish/fail/stop then drop it as cancelled). A worker that
-- missed the message finds the mark when it takes stock after (re)subscribing.
-- Keys: pending front delayed active deadlines failed stats idle unique lockwaits lockheads outbox blocked batchruns limits starts partitions ring pactive pwait
-- @include inactive
-- Input: ARGV[3] id
-- Output: REMOVED, STOPPING (it is active), UNKNOWN, or FINISHED (failed or completed: delete it)
-- Events: 'cancelled' {ids} | 'cancelling' {ids, w}
local id = ARGV[3]
local tk = task_key(id)
local f = rcall('HMGET', tk, 's', 'w', 'c')
local s = state_of(f[1], f[3])
if not s then return @@UNKNOWN@@ end
if s == 'active' then
  rcall('HSET', tk, 'x', 1)
  if f[2] then rcall('PUBLISH', CONTROL .. f[2], 'c ' .. QUEUE .. ' ' .. id) end
  publish({e = 'cancelling', ids = {id}, w = f[2]})
  return @@STOPPING@@
end
if s == 'failed' or s == 'completed' then return @@FINISHED@@ end
remove_inactive(id, now_ms(), 'cancelled')
rcall('HINCRBY', K.stats, 'cancelled', 1)
publish({e = 'cancelled', ids = {id}, n = 1})
return @@REMOVED@@
