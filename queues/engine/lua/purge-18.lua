-- Delete up to `limit` of the tasks that wait to run: those on lock wait lists, then the
-- runnable ones (front, then pending, then the partitions' lists). Active and delayed tasks stay. Callers loop while it
-- says there is more; each call looks at `limit` entries at most.
-- Keys: pending front delayed active deadlines stats idle unique lockwaits lockheads outbox batchruns limits starts partitions ring pactive pwait
-- @include active
-- Input: ARGV[3] limit
-- Output: {tasks deleted, 1 if there may be more (call again) else 0}
-- Events: 'purged' {n}
local limit = tonumber(ARGV[3])
local now = now_ms()
local looked, deleted = 0, 0
local function delete(id, tk, uk)
  clear_unique(id, uk)
  task_ended(id, tk, 'deleted', now)
  forget(id, tk)
  rcall('DEL', tk)
  deleted = deleted + 1
end
while looked < limit do
  local first = rcall('ZRANGE', K.lockwaits, 0, 0)[1]
  if not first then break end
  local wk = lock_wait_key(first)
  local ids = rcall('LPOP', wk, limit - looked)
  for _, id in ipairs(ids or {}) do
    looked = looked + 1
    local tk = task_key(id)
    local f = rcall('HMGET', tk, 's', 'u')
    if f[1] == 'waiting' then
      rcall('HINCRBY', K.stats, 'waiting', -1)
      delete(id, tk, f[2])
    end
  end
  if rcall('LLEN', wk) == 0 then rcall('ZREM', K.lockwaits, first) end
end
local function purge_listed(ids)
  for _, id in ipairs(ids) do
    looked = looked + 1
    local tk = task_key(id)
    local f = rcall('HMGET', tk, 's', 'u', 'lk', 'c')
    if state_of(f[1], f[4]) == 'pending' then
      delete(id, tk, f[2])
      if f[3] and rcall('HGET', K.lockheads, f[3]) == id then
        rcall('HDEL', K.lockheads, f[3])
        promote_waiter(f[3], now)
      end
    else
      rcall('HINCRBY', K.stats, 'gone', -1)
    end
  end
end
for _, list in ipairs({K.front, K.pending}) do
  while looked < limit do
    local ids = rcall('LPOP', list, limit - looked)
    if not ids then break end
    purge_listed(ids)
  end
end
while looked < limit do
  local pks = rcall('HRANDFIELD', K.partitions, 10)
  if #pks == 0 then break end
  for _, pk in ipairs(pks) do
    if looked >= limit then break end
    local ids = rcall('LPOP', plist_key(pk), limit - looked)
    if ids then
      rcall('HINCRBY', K.stats, 'plisted', -#ids)
      purge_listed(ids)
    end
    if rcall('LLEN', plist_key(pk)) == 0 then
      rcall('HDEL', K.partitions, pk)
      rcall('ZREM', K.pwait, pk)
    end
  end
end
if deleted > 0 then
  rcall('HINCRBY', K.stats, 'deleted', deleted)
  publish({e = 'purged', n = deleted})
end
if looked >= limit then return {deleted, 1} end
return {deleted, 0}
