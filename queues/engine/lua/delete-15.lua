-- Delete tasks in any state but active (pending, delayed, waiting on a lock, failed, or a kept
-- result).
-- Input: ARGV[3] n, then n ids
-- Output: one code per id: 1 deleted, 0 unknown, -1 active (cancel it instead)
-- Events: 'deleted' {ids}
local n = tonumber(ARGV[3])
local out, deleted = {}, {}
for i = 1, n do
  local id = ARGV[3 + i]
  local tk = task_key(id)
  local s = rcall('HGET', tk, 's')
  if not s then
    out[i] = 0
  elseif s == 'active' then
    out[i] = -1
  else
    if s == 'completed' then  -- a kept result: the task already counts as completed
      rcall('ZREM', K.results, id)
      rcall('DEL', tk)
    else
      remove_inactive(id)
      deleted[#deleted + 1] = id
    end
    out[i] = 1
  end
end
if #deleted > 0 then
  rcall('HINCRBY', K.stats, 'deleted', #deleted)
  publish({e = 'deleted', ids = deleted, n = #deleted})
end
return out
