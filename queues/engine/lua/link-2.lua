-- Link new tasks (children, enqueued next in their own queues) to parents of this queue: each
-- live parent records them, so that its end is told to them. A parent that already ended
-- (its links, its kept result, the failed set, or the queue's record of ended tasks) answers
-- its outcome instead (the children get it with their enqueue). All or nothing: with
-- one unknown parent, nothing is written.
-- Keys: failed outbox
-- @include links
-- Input: ARGV[3] n parents, then the n parent ids, then the children's ids
-- Output: {OK, then per parent 'w' (live: linked) or its outcome: completed, failed,
--   cancelled, deleted}, or {UNKNOWN, index of the first unknown parent (1-based)}
local n = tonumber(ARGV[3])
local out = {@@OK@@}
for i = 1, n do
  local pid = ARGV[3 + i]
  local ended = rcall('HGET', links_key(pid), '=')
  local f = rcall('HMGET', task_key(pid), 's', 'c')
  local s = state_of(f[1], f[2])
  if ended then
    out[i + 1] = ended
  elseif not s then
    local sc = rcall('ZSCORE', ENDED, string.sub(pid, -16))  -- ended lately, leaving nothing else
    if not sc then return {@@UNKNOWN@@, i} end
    local code = tonumber(sc) % 4
    out[i + 1] = (code == 0 and 'completed') or (code == 1 and 'failed') or (code == 2 and 'cancelled') or 'deleted'
  elseif rcall('ZSCORE', K.failed, pid) then
    out[i + 1] = 'failed'
  elseif s == 'completed' then
    out[i + 1] = 'completed'
  else
    out[i + 1] = 'w'
  end
end
for i = 1, n do
  if out[i + 1] == 'w' then
    local lk = links_key(ARGV[3 + i])
    for j = 4 + n, #ARGV do rcall('HSET', lk, ARGV[j], 1) end
  end
end
return out
