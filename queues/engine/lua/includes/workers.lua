-- @include active
-- @include lease
-- Failing a worker: every task it held in this queue goes back first in line.

-- The latest-started task is requeued first, so the earliest-started ends up frontmost (the
-- order they had; tasks started in the same millisecond by id). Their leases are bumped (the old holder's reports are refused from now on)
-- and the attempt counts. Locks it kept for handlers still running are released. Returns the
-- number of tasks requeued.
local function fail_worker(w, reason, now)
  rcall('SREM', K.idle, w)  -- first: a wake-up below must never go to this worker
  local wk = worker_tasks_key(w)
  local ids = rcall('SMEMBERS', wk)
  local started = {}
  for _, id in ipairs(ids) do started[id] = tonumber(rcall('ZSCORE', K.active, id) or '0') end
  table.sort(ids, function(a, b)
    if started[a] ~= started[b] then return started[a] > started[b] end
    return a > b
  end)
  local requeued = {}
  for _, id in ipairs(ids) do
    local tk = task_key(id)
    local f = rcall('HMGET', tk, 'l', 'lk', 'w', 's', 'x', 'u')
    if f[4] == 'active' and f[3] == w then
      leave_active(id, f[1], f[2], w, f[5] and 'release' or 'requeue', now)
      rcall('HSET', tk, 'l', new_lease())  -- fence the old holder out
      if requeue_front(id, tk, f[5], f[6], f[2], now) == 1 then requeued[#requeued + 1] = id end
    end
  end
  release_held(w, nil, now)
  rcall('DEL', wk)
  local deadline = rcall('ZSCORE', K.workers, w)  -- the deadline it missed (ms), in the event
  rcall('ZREM', K.workers, w)
  publish({e = reason, w = w, ids = requeued, n = #requeued, dl = tonumber(deadline)})
  wake(#requeued)
  return #requeued
end
