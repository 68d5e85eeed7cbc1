-- Delete up to `limit` pending tasks from the head of the queue (callers loop until 0).
-- Input: ARGV[3] limit
-- Output: number of tasks deleted
-- Events: 'purged' {n}
local ids = rcall('LPOP', K.pending, tonumber(ARGV[3]))
if not ids then return 0 end
for _, id in ipairs(ids) do
  local tk = task_key(id)
  clear_unique(id, rcall('HGET', tk, 'u'))
  rcall('DEL', tk)
end
rcall('HINCRBY', K.stats, 'deleted', #ids)
publish({e = 'purged', n = #ids})
return #ids
