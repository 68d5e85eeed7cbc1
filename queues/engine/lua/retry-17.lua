-- Put failed tasks back at the tail of the queue with their attempts reset (on their lock's
-- wait list if the lock is taken).
-- Keys: pending front delayed active failed stats idle unique lockwaits lockheads outbox limits starts partitions ring pactive pwait
-- @include locks
-- @include links
-- Input: ARGV[3] n, then n ids
-- Output: one code per id: REQUEUED, UNKNOWN, or NOT_FAILED
-- Events: 'retried' {ids}
local n = tonumber(ARGV[3])
local now = now_ms()
local out, retried, runnable = {}, {}, 0
for i = 1, n do
  local id = ARGV[3 + i]
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 's', 'u', 'lk', 'c')
  if not f[1] and not f[4] then
    out[i] = @@UNKNOWN@@
  elseif f[1] ~= 'failed' then
    out[i] = @@NOT_FAILED@@
  else
    rcall('ZREM', K.failed, id)
    rcall('HSET', tk, 'a', 0)
    rcall('HDEL', tk, 'fa', 'due')
    rcall('HDEL', links_key(id), '=', 'why', 'rt')  -- it may end again: children linked from now on wait for that
    rcall('ZREM', ENDED, string.sub(id, -16))
    if f[2] then rcall('HSETNX', K.unique, f[2], id) end
    if make_runnable(id, tk, f[3], 'tail', now) then runnable = runnable + 1 end
    retried[#retried + 1] = id
    out[i] = @@REQUEUED@@
  end
end
if #retried > 0 then
  publish({e = 'retried', ids = retried, n = #retried})
  wake(runnable)
end
return out
