-- The children and batch of ended tasks were told: take them off the outbox. Their links are
-- kept a day more (a child enqueued after a parent's end reads its outcome there).
-- Keys: outbox
-- @include links
-- Input: ARGV[3] n, then n task ids, then '1' if their links go now (the queue is being dropped)
-- Output: number taken off
local n = tonumber(ARGV[3])
local forget = ARGV[4 + n] == '1'
local removed = 0
for i = 1, n do
  local id = ARGV[3 + i]
  removed = removed + rcall('ZREM', K.outbox, id)
  if forget then rcall('UNLINK', links_key(id)) else rcall('PEXPIRE', links_key(id), LINKS_KEEP_MS) end
end
return removed
