-- @include locks
-- @include links
-- Leaving the active state: a task finishes, fails, is given back or dropped.

-- Drop the unique marker if this task still owns it.
local function clear_unique(id, uk)
  if uk and rcall('HGET', K.unique, uk) == id then rcall('HDEL', K.unique, uk) end
end

-- Take an active task out of the active state (not out of Redis): off the active and deadline
-- sets and its holder's set. Its lock is released ('release'), released without letting a
-- waiter in because the task goes back first in line ('requeue'), or kept until the handler
-- has really stopped ('keep': its outcome is recorded while it still runs). In 'keep' mode its
-- slots under the queue's and its partition's concurrency are kept likewise, when there is a
-- concurrency to keep them under or a partition (so an unlimited queue pays nothing for it).
local function leave_active(id, lease, lk, w, lock_mode, now)
  rcall('ZREM', K.active, id)
  local f = rcall('HMGET', task_key(id), 'bt', 'pk')
  local bt, pk = f[1], f[2]
  if bt and rcall('HINCRBY', K.batchruns, bt, -1) <= 0 then rcall('HDEL', K.batchruns, bt) end
  rcall('ZREM', K.deadlines, id)
  if w then rcall('SREM', worker_tasks_key(w), id) end
  local keep = lock_mode == 'keep' and w
  if keep and (pk or limits().c) then keep_slot(id .. ':' .. lease, pk, w) else limits_left(pk) end
  if lk then
    if keep and keep_lock(id, lease, lk, w) then return end
    release_lock(id, lease, lk, lock_mode == 'requeue', now)
  end
end

-- A task asked to cancel while active has left that state: it is gone, counted as cancelled.
local function drop_cancelled(id, tk, uk, now, worker)
  clear_unique(id, uk)
  task_ended(id, tk, 'cancelled', now, worker)
  forget(id, tk)
  rcall('DEL', tk)
  rcall('HINCRBY', K.stats, 'cancelled', 1)
end

-- Put a task that left the active state ('requeue' mode) back first in line, or drop it if a
-- cancel was asked for (then its lock's next waiter may run). Returns 1 if it was requeued.
local function requeue_front(id, tk, x, uk, lk, now)
  if x then
    drop_cancelled(id, tk, uk, now)
    if lk then promote_waiter(lk, now) end
    return 0
  end
  rcall('HDEL', tk, 'w', 'st')
  make_runnable(id, tk, lk, 'front', now)
  return 1
end
