-- Override the queue's limits at run time (durable; every worker's next start sees them), or
-- go back to the handler's values. Idle workers are woken as far as the new limits let tasks
-- start, and sleepers forget a rate window that may no longer hold anything back; partitions
-- parked by their rate go back to the ring to be looked at under the new limits (up to 1,000,
-- in name order; any others when their window opens), then those parked by their concurrency
-- that the new partition concurrency lets run (up to 1,000; any others when one of their tasks
-- ends).
-- Keys: pending front delayed active stats idle limits starts partitions ring pactive pwait
-- @include limits
-- Input: ARGV[3] 'reset' (drop every override first, and end the holds of RateLimited) or 'set', then the overrides of
--   ARGV[4] concurrency, ARGV[5] rate starts, ARGV[6] rate window ms, ARGV[7] partition
--   concurrency, ARGV[8] partition rate starts, ARGV[9] its window ms: each a number, '-' for
--   none, or '' to leave that override as it is
-- Output: 1
-- Events: 'limits'
if ARGV[3] == 'reset' then
  for _, name in ipairs(LIMIT_FIELDS) do rcall('HDEL', K.limits, 'o' .. name) end
  rcall('HDEL', K.limits, 'hu')  -- a RateLimited's holds end too
  rcall('DEL', HOLDS)
end
for i, name in ipairs(LIMIT_FIELDS) do
  if (ARGV[3 + i] or '') ~= '' then rcall('HSET', K.limits, 'o' .. name, ARGV[3 + i]) end
end
settle_limits()
rcall('HDEL', K.limits, 'ro')
LIMITS = nil
local parked = rcall('ZRANGE', K.pwait, 0, 999)
table.sort(parked)
for _, pk in ipairs(parked) do
  rcall('ZREM', K.pwait, pk)
  if rcall('HGET', K.partitions, pk) == 'w' then
    rcall('HSET', K.partitions, pk, 'r')
    rcall('RPUSH', K.ring, pk)
  end
end
unpark_partitions()
publish({e = 'limits'})
wake(math.min(rcall('SCARD', K.idle), listed_runnable(), (queue_room(now_ms()))))
return 1
