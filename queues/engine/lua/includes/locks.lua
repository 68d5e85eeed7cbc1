-- @include limits
-- Locks. A task with a lock key runs only while it holds that lock (lock:<key> = '<id>:<lease>',
-- always with an expiry). At most one runnable task per lock, its head (lockheads[<key>]); the
-- others wait on the lock's wait list, in order, and become runnable one at a time, at the tail
-- of 'front', as the lock frees. Nothing is re-scanned, and every step here is O(1) (a wait list
-- holding removed tasks is skipped through at most 1000 at a time, the heartbeat going on).

-- Set when a task goes on 'front' in this call: take_tasks (take.lua) takes from pending in
-- batches while front is empty, and looks at front again once this is set.
local front_pushed = false

-- When the heartbeat's safety net should look at a lock's waiters if nothing frees them:
-- just after the lock's expiry, or in a second.
local function recheck_at(lk, now)
  local pttl = rcall('PTTL', lock_key(lk))
  if pttl > 0 then return now + pttl + 1 end
  return now + 1000
end

-- Put a task on the wait list of lock lk: last, or first in line (a task given back).
local function wait_for_lock(id, tk, lk, first, now)
  if first then rcall('LPUSH', lock_wait_key(lk), id) else rcall('RPUSH', lock_wait_key(lk), id) end
  rcall('HSET', tk, 's', 'waiting')
  rcall('HINCRBY', K.stats, 'waiting', 1)
  rcall('ZADD', K.lockwaits, 'NX', recheck_at(lk, now), lk)
end

-- Whether a new task with lock lk may be runnable now (the lock is free and has no runnable
-- head): then it becomes the head, id. Enqueue uses it once per batch: the others wait.
local function claim_turn(lk, id)
  if rcall('HEXISTS', K.lockheads, lk) == 1 or rcall('EXISTS', lock_key(lk)) == 1 then return false end
  rcall('HSET', K.lockheads, lk, id)
  return true
end

-- Make a task runnable: at the tail of pending ('tail'), or at the head of front ('front', a
-- task given back). A task whose lock is held, or already has a runnable head, waits instead.
-- Returns true if it is runnable. 'rd' notes when it became ready to run (`ready`, else now):
-- its wait time is counted from then (stats.lua's record_timings).
local function make_runnable(id, tk, lk, where, now, ready)
  if lk and not claim_turn(lk, id) then
    wait_for_lock(id, tk, lk, where == 'front', now)
    return false
  end
  rcall('HSET', tk, 's', 'pending', 'rd', ready or now)
  local pk = rcall('HGET', tk, 'pk')
  if pk then return list_in_partition(id, pk, where == 'front') end
  if where == 'front' then
    rcall('LPUSH', K.front, id)
    front_pushed = true
  else
    rcall('RPUSH', K.pending, id)
  end
  return true
end

-- Let the next waiter of lock lk run if the lock is free and it has no runnable head: it goes
-- to the tail of front (waiters whose turn came run in the order they came; a partitioned one
-- goes first in its partition), and an idle worker is woken. Returns 1 if a waiter became runnable.
local function promote_waiter(lk, now)
  if rcall('HEXISTS', K.lockheads, lk) == 1 or rcall('EXISTS', lock_key(lk)) == 1 then return 0 end
  local wk = lock_wait_key(lk)
  for _ = 1, 1000 do
    local id = rcall('LPOP', wk)
    if not id then break end
    local tk = task_key(id)
    if rcall('HGET', tk, 's') == 'waiting' then  -- else removed while waiting: skip it
      rcall('HINCRBY', K.stats, 'waiting', -1)
      rcall('HSET', K.lockheads, lk, id)
      rcall('HSET', tk, 's', 'pending')
      local pk = rcall('HGET', tk, 'pk')
      local runnable = true
      if pk then
        runnable = list_in_partition(id, pk, true)
      else
        rcall('RPUSH', K.front, id)
        front_pushed = true
      end
      if rcall('LLEN', wk) == 0 then rcall('ZREM', K.lockwaits, lk) end
      if runnable then wake(1) end
      return 1
    end
  end
  if rcall('LLEN', wk) == 0 then rcall('ZREM', K.lockwaits, lk) else rcall('ZADD', K.lockwaits, now, lk) end
  return 0
end

-- Release lock lk if delivery id:lease holds it; then its next waiter may run, unless the
-- task itself goes back first in line (`requeued`): it takes the lock again first.
local function release_lock(id, lease, lk, requeued, now)
  if rcall('GET', lock_key(lk)) == id .. ':' .. lease then rcall('DEL', lock_key(lk)) end
  if not requeued then promote_waiter(lk, now) end
end

-- Keep lock lk held by delivery id:lease after its outcome was recorded, because its handler
-- has not stopped yet: worker w keeps it alive and releases it when the handler has really
-- stopped (or the worker's death does). Returns true if kept. (It overwrites the '' that
-- keep_slot may have written for the same holder.)
local function keep_lock(id, lease, lk, w)
  local holder = id .. ':' .. lease
  if w and rcall('GET', lock_key(lk)) == holder then
    rcall('HSET', held_key(w), holder, lk)
    return true
  end
  return false
end

-- Release the locks and slots worker w kept for `holders` ('<id>:<lease>' each), or for all of
-- them (its held hash: holder -> lock key, '' for a holder that kept slots only). Holders w
-- keeps nothing for are ignored.
local function release_held(w, holders, now)
  local hk = held_key(w)
  if not holders then holders = rcall('HKEYS', hk) end
  for _, holder in ipairs(holders) do
    local lk = rcall('HGET', hk, holder)
    if lk then
      rcall('HDEL', hk, holder)
      if lk ~= '' then
        if rcall('GET', lock_key(lk)) == holder then rcall('DEL', lock_key(lk)) end
        promote_waiter(lk, now)
      end
      release_slot(holder)
    end
  end
end
