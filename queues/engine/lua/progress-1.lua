-- Record what running handlers report: their progress (a fraction and a message) and log
-- lines, each appended to the task's log, a ring of the last @@task_log_max@@ lines.
-- A report is taken only from the task's current holder (its lease) while the task is active;
-- a late one (the task finished, failed for good or was handed on) is refused, so a log never
-- outlives its task.
-- Keys: active
-- @include base
-- Input: ARGV[3] n, then n groups: id, lease, fraction ('' for none), message, k, then k lines
-- Output: one code per group: OK or STALE
-- Events: 'progress' {items = [{id, p (fraction), m (message), lines (the last 20), n (lines)}]}
local n = tonumber(ARGV[3])
local out, items = {}, {}
local j = 4
for i = 1, n do
  local id, lease, fraction, message, k = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], tonumber(ARGV[j + 4])
  local first = j + 5
  j = first + k
  local tk = task_key(id)
  if rcall('ZSCORE', K.active, id) and rcall('HGET', tk, 'l') == lease then
    local item = {id = id, n = k}
    if fraction ~= '' then
      rcall('HSET', tk, 'pg', fraction, 'pm', message)
      item.p = tonumber(fraction)
      item.m = message
    end
    if k > 0 then
      local lk = log_key(id)
      for s = first, first + k - 1, 1000 do
        rcall('RPUSH', lk, unpack(ARGV, s, math.min(s + 999, first + k - 1)))
      end
      rcall('LTRIM', lk, -@@task_log_max@@, -1)
      local lines = {}
      for s = math.max(first, first + k - 20), first + k - 1 do lines[#lines + 1] = string.sub(ARGV[s], 1, 500) end
      item.lines = lines
    end
    items[#items + 1] = item
    out[i] = @@OK@@
  else
    out[i] = @@STALE@@
  end
end
if #items > 0 then publish({e = 'progress', items = items, n = #items}) end
return out
