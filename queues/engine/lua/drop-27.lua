-- Drop the queue: up to `limit` tasks per call, then, when none is left, every key of the
-- queue. Workers holding its tasks are told to stop them (their reports are then refused); a
-- handler may run on (a sync one can't be stopped), so, as a cancel's, its lock and its slots
-- under the limits stay taken until its worker says it returned (release) or dies (the reaper).
-- The workers serving the queue stay registered, with their handlers' limits (the operator's
-- overrides go); with none, nothing of the queue is left.
-- Each task ends 'deleted' (task_ended): its children in other queues and its batch are told
-- through the outbox, which the caller drains between calls (the links of those in it stay
-- until then). Callers loop until it returns 0 (it returns 1 while the outbox holds any).
-- Keys: pending front delayed active deadlines failed failures stats throughput meta workers idle unique lockwaits lockheads results durations outbox blocked batchruns once limits starts partitions ring pactive pwait
-- @include active
-- @include erase
-- Input: ARGV[3] limit
-- Output: 1 while tasks are left, 0 when the queue is gone
-- Events: 'dropped' once at the end
local limit = tonumber(ARGV[3])
local now = now_ms()
local looked = 0
local function unlink_all(ids)
  for _, id in ipairs(ids) do
    local tk = task_key(id)
    if rcall('EXISTS', tk) == 1 then task_ended(id, tk, 'deleted', now) end
    forget(id, tk)
    rcall('UNLINK', tk, parents_key(id))
    if not rcall('ZSCORE', K.outbox, id) then rcall('UNLINK', links_key(id)) end
  end
  looked = looked + #ids
end
for _, id in ipairs(rcall('ZRANGE', K.active, 0, limit - 1)) do
  local f = rcall('HMGET', task_key(id), 'w', 'lk', 'l')
  local w = f[1]
  if w then rcall('PUBLISH', CONTROL .. w, 'c ' .. QUEUE .. ' ' .. id) end
  if w and not rcall('ZSCORE', K.workers, w) then w = nil end  -- no worker to keep anything for
  leave_active(id, f[3] or '', f[2], w, w and 'keep' or 'release', now)
  unlink_all({id})
end
while looked < limit do
  local first = rcall('ZRANGE', K.lockwaits, 0, 0)[1]
  if not first then break end
  local ids = rcall('LPOP', lock_wait_key(first), limit - looked)
  if ids then unlink_all(ids) end
  if rcall('LLEN', lock_wait_key(first)) == 0 then rcall('ZREM', K.lockwaits, first) end
end
for _, set in ipairs({K.delayed, K.failed, K.results, K.blocked}) do
  if looked < limit then
    local ids = rcall('ZRANGE', set, 0, limit - looked - 1)
    if #ids > 0 then
      unlink_all(ids)
      rcall('ZREM', set, unpack(ids))
    end
  end
end
for _, list in ipairs({K.front, K.pending}) do
  if looked < limit then
    local ids = rcall('LPOP', list, limit - looked)
    if ids then unlink_all(ids) end
  end
end
while looked < limit do
  local pks = rcall('HRANDFIELD', K.partitions, 10)
  if #pks == 0 then break end
  for _, pk in ipairs(pks) do
    if looked < limit then
      local ids = rcall('LPOP', plist_key(pk), limit - looked)
      if ids then unlink_all(ids) end
      if rcall('LLEN', plist_key(pk)) == 0 then rcall('HDEL', K.partitions, pk) end
    end
  end
end
if looked >= limit or rcall('EXISTS', K.active, K.lockwaits, K.delayed, K.failed, K.results, K.blocked, K.front, K.pending,
    K.partitions, K.outbox) > 0 then
  return 1
end
if rcall('ZCARD', K.workers) == 0 then
  -- No worker serves the queue: none is left to release what was kept, and no key stays.
  erase_queue('dropped')
  return 0
end
rcall('UNLINK', K.pending, K.front, K.delayed, K.active, K.deadlines, K.failed, K.failures, K.stats,
  K.throughput, K.unique, K.lockwaits, K.lockheads, K.results, K.durations, K.ring, K.pwait, K.blocked,
  K.outbox, K.batchruns, K.once, ENDED, RESEND, HISTORY, HISTORY_INDEX.completed, HISTORY_INDEX.cancelled,
  HISTORY_INDEX.failed, AGAIN, PREFIX .. '@@timings@@')
-- Its workers stay registered: their timings (meta lt, gr, dt), their handlers' limits (the
-- operator's overrides go) and what they keep for handlers still running (kept, pactive,
-- their held hashes and locks); the rate's log of starts expires by itself.
for _, field in ipairs(rcall('HKEYS', K.meta)) do
  if field ~= 'lt' and field ~= 'gr' and field ~= 'dt' then rcall('HDEL', K.meta, field) end
end
for _, name in ipairs(LIMIT_FIELDS) do rcall('HDEL', K.limits, 'o' .. name) end
rcall('HDEL', K.limits, 'ro')
settle_limits()
publish({e = 'dropped'})
return 0
