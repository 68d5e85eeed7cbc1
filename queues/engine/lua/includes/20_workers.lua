-- Worker helpers: failing a worker puts every task it held in this queue back at the front.

local function fail_worker(w, reason)
  local wk = worker_tasks_key(w)
  local ids = rcall('SMEMBERS', wk)
  -- Requeue the latest-started first, so the earliest-started ends up at the very front.
  local started = {}
  for _, id in ipairs(ids) do started[id] = tonumber(rcall('ZSCORE', K.active, id) or '0') end
  table.sort(ids, function(a, b) return started[a] > started[b] end)
  local requeued = {}
  for _, id in ipairs(ids) do
    local tk = task_key(id)
    local f = rcall('HMGET', tk, 'l', 'lk', 'w', 's', 'x', 'u')
    if f[4] == 'active' and f[3] == w then
      leave_active(id, f[1], f[2], w, not f[5])
      rcall('HINCRBY', tk, 'l', 1)  -- fence: the old holder's lease is void from now on
      if requeue_front(id, tk, f[5], f[6]) == 1 then requeued[#requeued + 1] = id end
    end
  end
  rcall('DEL', wk)
  rcall('ZREM', K.workers, w)
  rcall('SREM', K.idle, w)
  publish({e = reason, w = w, ids = requeued, n = #requeued})
  wake(#requeued)
  return #requeued
end
