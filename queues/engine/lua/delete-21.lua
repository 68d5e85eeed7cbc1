-- Delete tasks in any state but active (pending, delayed, waiting on a lock, blocked, failed, or a kept
-- result), each in O(1).
-- Keys: pending front delayed active deadlines failed stats idle unique lockwaits lockheads results outbox blocked batchruns limits starts partitions ring pactive pwait
-- @include inactive
-- Input: ARGV[3] '1': only failed and completed tasks ('0': any state but active; removing a task that has not
--   run is a cancel, a right of its own), ARGV[4] n, then n ids
-- Output: one code per id: DELETED, UNKNOWN, ACTIVE (cancel it instead), or NOT_FINISHED (only finished ones
--   were asked for)
-- Events: 'deleted' {ids}
local finished_only = ARGV[3] == '1'
local n = tonumber(ARGV[4])
local now = now_ms()
local out, deleted = {}, {}
for i = 1, n do
  local id = ARGV[4 + i]
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 's', 'c')
  local s = state_of(f[1], f[2])
  if not s then
    out[i] = @@UNKNOWN@@
  elseif s == 'active' then
    out[i] = @@ACTIVE@@
  elseif finished_only and s ~= 'failed' and s ~= 'completed' then
    out[i] = @@NOT_FINISHED@@
  else
    if s == 'completed' then  -- a kept result: the task already counts as completed
      rcall('ZREM', K.results, id)
      rcall('DEL', tk)
    else
      remove_inactive(id, now, 'deleted')
      deleted[#deleted + 1] = id
    end
    out[i] = @@DELETED@@
  end
end
if #deleted > 0 then
  rcall('HINCRBY', K.stats, 'deleted', #deleted)
  publish({e = 'deleted', ids = deleted, n = #deleted})
end
return out
