-- Taking tasks, shared by start (a worker asks) and enqueue (a task is handed straight to an
-- idle worker, saving it a round trip).

-- Take up to `count` runnable tasks from the head of the queue for `worker`, appending 9
-- fields per task to `out` (id, payload, lease, attempt, timeout, callback, meta, retries,
-- payload kind). A task whose lock is held goes aside onto that lock's wait list. Each task
-- taken gets a new lease (fencing token), its lock, and is recorded as held by the worker.
-- opts: lock_ttl (ms), grace (ms), default_timeout (s). Returns the ids taken.
local function take_tasks(worker, count, out, now, opts)
  local taken, waiting = {}, {}
  local wk = worker_tasks_key(worker)
  while #taken < count do
    local id = rcall('LPOP', K.pending)
    if not id then break end
    local tk = task_key(id)
    local f = rcall('HMGET', tk, 'p', 'lk', 't', 'cb', 'm', 'r', 'y')
    if f[1] then
      local lk = f[2]
      if lk and rcall('EXISTS', lock_key(lk)) == 1 then
        rcall('RPUSH', lock_wait_key(lk), id)
        rcall('HSET', tk, 's', 'waiting')
        rcall('ZADD', K.lockwaits, 'NX', now + opts.lock_ttl, lk)
        waiting[#waiting + 1] = id
      else
        local lease = rcall('HINCRBY', tk, 'l', 1)
        local attempt = rcall('HINCRBY', tk, 'a', 1)
        if lk then rcall('SET', lock_key(lk), id .. ':' .. lease, 'PX', opts.lock_ttl) end
        rcall('HSET', tk, 's', 'active', 'w', worker, 'st', now)
        -- the fraction keeps the start order of one batch (a requeue restores it)
        rcall('ZADD', K.active, now + math.min(#taken, 999) / 1000, id)
        rcall('SADD', wk, id)
        local timeout = tonumber(f[3] or opts.default_timeout)
        if timeout > 0 then rcall('ZADD', K.deadlines, now + timeout * 1000 + opts.grace, id) end
        taken[#taken + 1] = id
        local i = #out
        out[i + 1], out[i + 2], out[i + 3], out[i + 4] = id, f[1], tostring(lease), tostring(attempt)
        out[i + 5], out[i + 6], out[i + 7], out[i + 8] = tostring(timeout), f[4] or '', f[5] or '', f[6] or ''
        out[i + 9] = f[7] or ''
      end
    end
  end
  if #waiting > 0 then
    rcall('HINCRBY', K.stats, 'waiting', #waiting)
    publish({e = 'waiting', ids = waiting, n = #waiting})
  end
  if #taken > 0 then publish({e = 'started', w = worker, ids = taken, n = #taken}) end
  return taken
end

-- Hand up to n runnable tasks straight to idle workers, one each, over their control channels
-- (the delivery travels in the message: 't <queue>' then each field as '<length>:<bytes>').
-- Uses the timings the queue's workers registered with. Returns how many were handed out.
local function push_to_idle(n)
  if n <= 0 or rcall('HEXISTS', K.meta, 'paused') == 1 then return 0 end
  local cfg = rcall('HMGET', K.meta, 'lt', 'gr', 'dt')
  if not cfg[1] then return 0 end
  local opts = {lock_ttl = tonumber(cfg[1]), grace = tonumber(cfg[2]), default_timeout = tonumber(cfg[3])}
  local now = now_ms()
  local pushed = 0
  while pushed < n do
    local w = rcall('SPOP', K.idle)
    if not w then break end
    local fields = {}
    if #take_tasks(w, 1, fields, now, opts) == 0 then
      rcall('SADD', K.idle, w)
      break
    end
    local parts = {'t ', QUEUE, '\n'}
    for _, v in ipairs(fields) do
      parts[#parts + 1] = #v .. ':'
      parts[#parts + 1] = v
    end
    rcall('PUBLISH', CONTROL .. w, table.concat(parts))
    pushed = pushed + 1
  end
  return pushed
end
