-- Task helpers shared by the transitions: unique markers, locks, leaving the active state.

-- Drop the unique marker if this task still owns it.
local function clear_unique(id, uk)
  if uk and rcall('HGET', K.unique, uk) == id then rcall('HDEL', K.unique, uk) end
end

-- Make the next task waiting on lock lk runnable: it goes to the front of the queue.
local function promote_waiter(lk)
  local wk = lock_wait_key(lk)
  local nxt = rcall('LPOP', wk)
  if nxt then
    rcall('HSET', task_key(nxt), 's', 'pending')
    rcall('LPUSH', K.pending, nxt)
    rcall('HINCRBY', K.stats, 'waiting', -1)
    wake(1)
  end
  if rcall('LLEN', wk) == 0 then rcall('ZREM', K.lockwaits, lk) end
end

-- Release lock lk if the delivery (id, lease) holds it; if the lock is then free, its next
-- waiter becomes runnable, unless `requeued`: the task itself goes back to the front and will
-- take the lock again first, so its waiters keep their turn behind it.
local function release_lock(id, lease, lk, requeued)
  if not lk then return end
  local key = lock_key(lk)
  local holder = rcall('GET', key)
  if holder == id .. ':' .. lease then
    rcall('DEL', key)
    holder = false
  end
  if not holder and not requeued then promote_waiter(lk) end
end

-- Take an active task out of the active state (not out of Redis): off the active and
-- deadline sets and the holder's set, its lock released (see release_lock for `requeued`).
local function leave_active(id, lease, lk, w, requeued)
  rcall('ZREM', K.active, id)
  rcall('ZREM', K.deadlines, id)
  if w then rcall('SREM', worker_tasks_key(w), id) end
  release_lock(id, lease, lk, requeued)
end

-- Delete a task that is not active (pending, delayed, waiting or failed) from wherever it is.
-- Returns false if it was active or unknown.
local function remove_inactive(id)
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 's', 'lk', 'u')
  local s = f[1]
  if s == 'pending' then
    rcall('LREM', K.pending, 1, id)
    -- it may have been first in line for a free lock (requeued ahead of its waiters)
    if f[2] and rcall('EXISTS', lock_key(f[2])) == 0 then promote_waiter(f[2]) end
  elseif s == 'delayed' then rcall('ZREM', K.delayed, id)
  elseif s == 'failed' then rcall('ZREM', K.failed, id)
  elseif s == 'waiting' then
    rcall('LREM', lock_wait_key(f[2]), 1, id)
    rcall('HINCRBY', K.stats, 'waiting', -1)
    if rcall('LLEN', lock_wait_key(f[2])) == 0 then rcall('ZREM', K.lockwaits, f[2]) end
  else
    return false, s
  end
  clear_unique(id, f[3])
  rcall('DEL', tk)
  return true, s
end

-- Record a failed attempt of a task that already left the active state: retried after the
-- backoff while attempts remain, else moved to the failed set. Either way the failure goes
-- into the history, trimmed to hist entries. Returns 3 (retrying) or 4 (failed for good).
-- opts: error, traceback, worker, retries, backoff, backoff_max, jitter, hist.
local function record_failure(id, tk, now, opts)
  local f = rcall('HMGET', tk, 'a', 'r', 'b', 'p', 'u')
  local attempts = tonumber(f[1] or '0')
  local retries = tonumber(f[2] or opts.retries)
  local backoff = tonumber(f[3] or opts.backoff)
  local entry = {
    id = id, payload = string.sub(f[4] or '', 1, 4096), error = opts.error,
    traceback = opts.traceback, attempts = attempts, worker = opts.worker or '', failed_at = now,
  }
  rcall('LPUSH', K.failures, cjson.encode(entry))
  rcall('LTRIM', K.failures, 0, opts.hist - 1)
  rcall('HSET', tk, 'e', opts.error, 'tb', opts.traceback)
  if opts.worker then rcall('HSET', tk, 'w', opts.worker) end
  rcall('HINCRBY', K.stats, 'failures', 1)
  count_minute('f', now, 1)
  if attempts <= retries then
    local wait = backoff * math.pow(2, math.max(attempts - 1, 0))
    if wait > opts.backoff_max then wait = opts.backoff_max end
    wait = wait * (1 + opts.jitter)
    delay_task(id, tk, now + math.floor(wait * 1000))
    rcall('HINCRBY', K.stats, 'retried', 1)
    publish({e = 'retrying', ids = {id}, error = string.sub(opts.error, 1, 200)})
    return 3
  end
  rcall('ZADD', K.failed, now, id)
  rcall('HSET', tk, 's', 'failed', 'fa', now)
  clear_unique(id, f[5])
  rcall('HINCRBY', K.stats, 'failed', 1)
  publish({e = 'failed', ids = {id}, error = string.sub(opts.error, 1, 200)})
  return 4
end

-- Finish an active task that had been asked to cancel: it is gone and counted as cancelled.
local function drop_cancelled(id, tk, uk)
  clear_unique(id, uk)
  rcall('DEL', tk)
  rcall('HINCRBY', K.stats, 'cancelled', 1)
end

-- Put a task that left the active state back at the front of the queue (or, if a cancel was
-- asked for, drop it). Returns 1 if it was requeued.
local function requeue_front(id, tk, x, uk)
  if x then
    local lk = rcall('HGET', tk, 'lk')
    drop_cancelled(id, tk, uk)
    if lk and rcall('EXISTS', lock_key(lk)) == 0 then promote_waiter(lk) end
    return 0
  end
  rcall('HSET', tk, 's', 'pending')
  rcall('HDEL', tk, 'w', 'st')
  rcall('LPUSH', K.pending, id)
  return 1
end
