-- Tasks of the batch ended (told by workflows.drain, after their end in their queue): each is
-- counted once, by its outcome (deleted counts as cancelled); then the batch may finish.
-- Keys: batch live
-- @include batch
-- Input: ARGV[3] n, then n pairs: task id, outcome (completed, failed, cancelled, deleted), then
--   optionally n traceparents of the runs that ended them (tracing on, '' for none): the last
--   counted one is kept ('rt'), for the callbacks' enqueue span to link to
-- Output: 1 if the batch finished now (its callbacks are due), else 0
-- Events: 'progress' {n}, 'finished' {st}
local n = tonumber(ARGV[3])
local now = now_ms()
local counted, rt = 0, nil
for i = 0, n - 1 do
  local id, outcome = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  if rcall('SREM', K.live, id) == 1 then
    local field = outcome
    if outcome ~= 'completed' and outcome ~= 'failed' then field = 'cancelled' end
    rcall('HINCRBY', K.batch, field, 1)
    counted = counted + 1
    local t = ARGV[4 + 2 * n + i]
    if t and t ~= '' then rt = t end
  end
end
if rt then rcall('HSET', K.batch, 'rt', rt) end
if counted > 0 then batch_publish({e = 'progress', n = counted}) end
return finish_if_done(now)
