-- @include active
-- Expiry (enqueue(..., expires=)): a task not started by its time 'ex' (ms) never starts. It is
-- checked where tasks are taken (take.lua), so every way a task starts obeys it: it ends there,
-- in the state 'expired' (no retry), counted in stats 'expired' and listed in `expired`. One
-- with a callback URL or a trace context goes to the outbox too (links:<id> fields 'cb', 'tc',
-- 'ex', and its retries and backoff 'xr', 'xb'), whose drain enqueues the callback's "expired" notice and records the trace's span.

local EXPIRED = PREFIX .. '@@expired@@'

-- End task id (just taken off its list; its hash tk still there) as expired if its time `ex`
-- has passed: its unique key and its lock's turn are given up (the lock's next waiter may
-- run), its children and batch are told 'expired', and its entry goes at the head of
-- `expired` (the newest @@expired_max@@ kept); `worker` (if given) is told to drain the outbox
-- now. Returns true if it expired.
local function expire_if_due(id, tk, ex, lk, now, worker)
  if not ex or tonumber(ex) > now then return false end
  local f = rcall('HMGET', tk, 'u', 'c', 'tg', 'cb', 'tc', 'r', 'b')
  clear_unique(id, f[1])
  if lk and rcall('HGET', K.lockheads, lk) == id then
    rcall('HDEL', K.lockheads, lk)
    promote_waiter(lk, now)
  end
  if f[4] or f[5] then  -- told by the outbox's drain: the callback's notice, the trace's span
    rcall('HSET', links_key(id), 'ex', ex, 'cb', f[4] or '', 'tc', f[5] or '', 'xr', f[6] or '', 'xb', f[7] or '')
  end
  task_ended(id, tk, 'expired', now, worker)
  forget(id, tk)
  rcall('DEL', tk)
  rcall('HINCRBY', K.stats, 'expired', 1)
  rcall('LPUSH', EXPIRED, cjson.encode({id = id, c = tonumber(f[2]), ex = tonumber(ex), at = now, tg = f[3]}))
  rcall('LTRIM', EXPIRED, 0, @@expired_max@@ - 1)
  publish({e = 'expired', ids = {id}, n = 1})
  return true
end
