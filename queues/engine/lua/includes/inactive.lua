-- @include active
-- Removing a task that is not active (cancel, delete).

-- Remove a task that is pending, delayed, waiting, blocked or failed, in O(1): a pending task's entry
-- stays in front/pending and is skipped when reached (counted in stats 'gone'), a waiting
-- task's entry likewise on its lock's wait list. If the task was its lock's runnable head, the
-- next waiter may run. Returns true, state; or false, state if it was active or unknown.
-- `outcome` ('cancelled' or 'deleted') is what its children and batch are told.
local function remove_inactive(id, now, outcome)
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 's', 'lk', 'u', 'c')
  local s, lk = state_of(f[1], f[4]), f[2]
  if s == 'pending' then
    rcall('HINCRBY', K.stats, 'gone', 1)
  elseif s == 'delayed' then
    rcall('ZREM', K.delayed, id)
  elseif s == 'failed' then
    rcall('ZREM', K.failed, id)
  elseif s == 'waiting' then
    rcall('HINCRBY', K.stats, 'waiting', -1)
  elseif s == 'blocked' then
    rcall('HINCRBY', K.stats, 'blocked', -1)
    rcall('ZREM', K.blocked, id)
  else
    return false, s
  end
  clear_unique(id, f[3])
  task_ended(id, tk, outcome, now)
  forget(id, tk)
  rcall('DEL', tk)
  if s == 'pending' and lk and rcall('HGET', K.lockheads, lk) == id then
    rcall('HDEL', K.lockheads, lk)
    promote_waiter(lk, now)
  end
  return true, s
end
