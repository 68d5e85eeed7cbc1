-- Close a batch: no more tasks; it finishes when every task has ended (now, if none is left).
-- With ARGV[3] = '1' (cancelling it) it is also marked cancelled.
-- Keys: batch live
-- @include batch
-- Input: ARGV[3] '1' when cancelling
-- Output: {OK or UNKNOWN, 1 if it finished now else 0}
-- Events: 'closed', 'finished' {st}
if rcall('EXISTS', K.batch) == 0 then return {@@UNKNOWN@@, 0} end
local now = now_ms()
if ARGV[3] == '1' then rcall('HSETNX', K.batch, 'x', now) end
if rcall('HSETNX', K.batch, 'closed', now) == 1 then
  if rcall('HGET', K.batch, 'st') == 'open' then rcall('HSET', K.batch, 'st', 'running') end
  batch_publish({e = 'closed'})
end
return {@@OK@@, finish_if_done(now)}
