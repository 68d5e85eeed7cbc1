-- Prune the queue's record of ended tasks (history.lua) by its retention, in a bounded step: the
-- records that ended before their outcome's cutoff go, then, while more than `max` are kept, the
-- oldest. At most `step` records go per call, so a call stays short whatever the record's size
-- (the workers call it again while it says more are due: history.py). A record's link to the
-- task it ran again (`again`) goes with it.
-- Keys: history hcompleted hcancelled hfailed again
-- @include base
-- Input: ARGV[3..5] the cutoffs (ms: records that ended before go) for completed, cancelled and
--   failed; ARGV[6] max (records kept per queue at most); ARGV[7] step (records removed at most)
-- Output: {removed, more (1 if some are still due)}
local cutoffs = {tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])}
local max, budget = tonumber(ARGV[6]), tonumber(ARGV[7])
local indexes = {K.hcompleted, K.hcancelled, K.hfailed}
local removed = 0

local function drop(index, ids)
  if #ids == 0 then return end
  rcall('HDEL', K.history, unpack(ids))
  rcall('HDEL', K.again, unpack(ids))  -- a run again's link goes with its record
  rcall('ZREM', index, unpack(ids))
  removed = removed + #ids
  budget = budget - #ids
end

for i, index in ipairs(indexes) do
  if budget <= 0 then break end
  drop(index, rcall('ZRANGEBYSCORE', index, '-inf', '(' .. string.format('%.0f', cutoffs[i]), 'LIMIT', 0, budget))
end
local over = -max
for _, index in ipairs(indexes) do over = over + rcall('ZCARD', index) end
while over > 0 and budget > 0 do  -- the oldest of all go first, in chunks of at most 100
  local oldest, at = nil, nil
  for _, index in ipairs(indexes) do
    local head = rcall('ZRANGE', index, 0, 0, 'WITHSCORES')
    if head[2] and (not at or tonumber(head[2]) < at) then oldest, at = index, tonumber(head[2]) end
  end
  if not oldest then break end
  local n = math.min(over, budget, 100)
  drop(oldest, rcall('ZRANGE', oldest, 0, n - 1))
  over = over - n
end
local more = 0
if over > 0 then more = 1 end
for i, index in ipairs(indexes) do
  if more == 0 and #rcall('ZRANGEBYSCORE', index, '-inf', '(' .. string.format('%.0f', cutoffs[i]), 'LIMIT', 0, 1) > 0 then
    more = 1
  end
end
return {removed, more}
