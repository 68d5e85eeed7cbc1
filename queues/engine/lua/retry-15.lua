-- Put failed tasks back at the tail of the queue with their attempts reset.
-- Input: ARGV[3] n, then n ids
-- Output: one code per id: 1 requeued, 0 unknown, -1 not failed
-- Events: 'retried' {ids}
local n = tonumber(ARGV[3])
local out, retried = {}, {}
for i = 1, n do
  local id = ARGV[3 + i]
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 's', 'u')
  if not f[1] then
    out[i] = 0
  elseif f[1] ~= 'failed' then
    out[i] = -1
  else
    rcall('ZREM', K.failed, id)
    rcall('HSET', tk, 's', 'pending', 'a', 0)
    rcall('HDEL', tk, 'fa', 'due')
    if f[2] then rcall('HSETNX', K.unique, f[2], id) end
    rcall('RPUSH', K.pending, id)
    retried[#retried + 1] = id
    out[i] = 1
  end
end
if #retried > 0 then
  publish({e = 'retried', ids = retried, n = #retried})
  wake(#retried)
end
return out
