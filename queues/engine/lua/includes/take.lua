-- @include locks
-- @include lease
-- @include expiry
-- Taking tasks, shared by start (a worker asks) and enqueue (a task is handed straight to an
-- idle worker, saving it a round trip).

-- Entries of front/pending looked at per call at most (removed tasks are skipped): no call
-- does unbounded work; a worker that hits the cap calls again at once.
local TAKE_SCAN_MAX = 1000

-- Make due delayed tasks runnable (at most 1000 per call; the next call goes on).
local function promote_due(now)
  promote_partitions(now)
  local found = rcall('ZRANGEBYSCORE', K.delayed, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1000)
  local due = {}
  for i = 1, #found, 2 do
    local id = found[i]
    due[#due + 1] = id
    rcall('ZREM', K.delayed, id)
    local tk = task_key(id)
    local f = rcall('HMGET', tk, 's', 'lk')
    if f[1] == 'delayed' then
      rcall('HDEL', tk, 'due')
      make_runnable(id, tk, f[2], 'tail', now, found[i + 1])  -- ready since its due time
    end
  end
  if #due > 0 then publish({e = 'promoted', n = #due, ids = due}) end
end

-- Start task `id` (taken off its list) for `worker` unless it was removed since it was listed
-- (or, never expected, its lock is held: it waits). Appends its fields to `out`; returns
-- true if it started. Its entries in the active set, its holder's set and the deadlines are
-- left to `started` (the caller writes them for all the call's tasks at once: flush_started).
local function start_task(worker, id, nth, out, now, opts, started)
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 'lk', 't', 'cb', 'm', 'r', 'y', 's', 'tc', 'pk', 'a', 'bt', 'bc', @@payload_fields@@, 'ex')
  if state_of(f[7], f[13] or f[14]) ~= 'pending' then  -- the payload's fields: it exists
    rcall('HINCRBY', K.stats, 'gone', -1)  -- removed (or run) since it was listed
    return false
  end
  local lk = f[1]
  if expire_if_due(id, tk, f[16], lk, now, worker) then return false end
  if lk and rcall('HGET', K.lockheads, lk) == id then rcall('HDEL', K.lockheads, lk) end
  if lk and rcall('EXISTS', lock_key(lk)) == 1 then
    wait_for_lock(id, tk, lk, true, now)  -- never expected: a runnable head's lock is free
    return false
  end
  local lease = new_lease()
  -- as strings once: each number handed to Redis (or joined to a string) costs a printf
  local lease_s, attempt_s = int_text(lease), int_text((tonumber(f[10]) or 0) + 1)
  if lk then rcall('SET', lock_key(lk), id .. ':' .. lease_s, 'PX', opts.lock_ttl) end
  rcall('HSET', tk, 'l', lease_s, 'a', attempt_s, 's', 'active', 'w', worker, 'st', opts.now_s)
  count_start(f[9], lease, now)
  -- the fraction keeps the start order of one batch (a requeue restores it)
  local a = started.active
  a[#a + 1], a[#a + 2] = opts.now_s .. string.format('.%03d', math.min(nth, 999)), id
  if f[11] then rcall('HINCRBY', K.batchruns, f[11], 1) end
  local timeout_s = f[2] or opts.default_timeout_s  -- as text: the reply's field, with no printf
  local timeout = tonumber(timeout_s)
  if timeout > 0 then
    local d = started.deadlines
    d[#d + 1], d[#d + 2] = int_text(math.ceil(now + timeout * 1000 + opts.grace)), id
  end
  local i = #out
  out[i + 1], out[i + 2], out[i + 3], out[i + 4] = id, joined_payload(f, 13, tk), lease_s, attempt_s
  out[i + 5], out[i + 6], out[i + 7], out[i + 8] = timeout_s, f[3] or '', f[4] or '', f[5] or ''
  out[i + 9], out[i + 10], out[i + 11] = f[6] or '', f[8] or '', f[11] or f[12] or ''
  return true
end

-- Write the set entries of the tasks started (start_task's `started`): a few commands per call,
-- not three per task. Nothing the taking reads in between looks at these sets.
local function flush_started(wk, taken, started)
  for s = 1, #started.active, 1000 do
    rcall('ZADD', K.active, unpack(started.active, s, math.min(s + 999, #started.active)))
  end
  for s = 1, #started.deadlines, 1000 do
    rcall('ZADD', K.deadlines, unpack(started.deadlines, s, math.min(s + 999, #started.deadlines)))
  end
  for s = 1, #taken, 1000 do rcall('SADD', wk, unpack(taken, s, math.min(s + 999, #taken))) end
end

-- Take up to `count` runnable tasks, from the head of front, then pending, then the ring of
-- partitions (one task per partition per turn), for `worker`, as many as the limits allow,
-- appending 11 fields per task to `out` (id, payload, lease, attempt, timeout, callback, meta,
-- retries, payload kind, trace context, batch: the task's own or the one it is a callback of). Each task taken gets a new lease (fencing token) and
-- its lock, and is recorded as held by the worker. opts: lock_ttl (ms), grace (ms),
-- default_timeout (s).
-- Returns the ids taken, and true if it stopped at TAKE_SCAN_MAX with more to look at.
local function take_tasks(worker, count, out, now, opts)
  local taken, started = {}, {active = {}, deadlines = {}}
  opts.now_s = int_text(now)
  opts.default_timeout_s = tostring(opts.default_timeout)
  local wk = worker_tasks_key(worker)
  local looked = 0
  local room, opens = queue_room(now)
  note_rate_hold(opens, now)
  if room < count then count = room end
  local function try(id)
    looked = looked + 1
    if id and start_task(worker, id, #taken, out, now, opts, started) then taken[#taken + 1] = id end
  end
  -- front is looked at until it is found empty, then again only if a task went on it since;
  -- pending's head is read as many at once as are wanted (LRANGE, then one LTRIM of those
  -- looked at: nothing puts a task at pending's head), and the reading stops when a task goes on
  -- front, so the order is as if each were popped in turn. (LPOP with a count would need 6.2.)
  local front_empty, more = false, false
  while #taken < count do
    if looked >= TAKE_SCAN_MAX then
      more = true
      break
    end
    local id = nil
    if front_pushed or not front_empty then
      front_pushed = false
      id = rcall('LPOP', K.front)
      front_empty = not id
    end
    if id then
      try(id)
    else
      local ids = rcall('LRANGE', K.pending, 0, math.min(count - #taken, TAKE_SCAN_MAX - looked) - 1)
      if #ids > 0 then
        reserve_leases(#ids)
        local seen = #ids
        for i, pid in ipairs(ids) do
          try(pid)
          if front_pushed then
            seen = i
            break
          end
        end
        rcall('LTRIM', K.pending, seen, -1)
      else
        id = next_partitioned(now)  -- false: a partition held back (or a stale entry)
        if id == nil then break end
        try(id)
      end
    end
  end
  settle_leases()
  flush_started(wk, taken, started)
  if #taken > 0 then publish({e = 'started', w = worker, ids = taken, n = #taken}) end
  return taken, more
end

-- An idle worker to hand a task to (SPOP), or nil when none is left. One whose deadline has
-- passed is handed nothing, as `start` answers it LATE (another worker's next beat may fail it
-- and run the task again elsewhere): it leaves the idle set, which it joins again by taking once
-- it has beaten (or its idle check finds it unlisted). At most 20 such are passed over a call.
local function pop_live_idle(now)
  for _ = 1, 20 do
    local w = rcall('SPOP', K.idle)
    if not w then return nil end
    local deadline = rcall('ZSCORE', K.workers, w)
    if deadline and tonumber(deadline) >= now then return w end
  end
  return nil
end

-- Hand up to n runnable tasks straight to idle workers, one each, over their control channels
-- (the delivery travels in the message: 't <queue>' then each field as '<length>:<bytes>').
-- Uses the timings the queue's workers registered with. Returns how many were handed out, and
-- whether no idle worker is left (then waking any is pointless). An idle worker is looked for
-- first: with none (a busy queue), that is the only command this costs.
local function push_to_idle(n, now)
  -- A rate-limited queue's idle workers are woken instead: a worker runs such a handler only
  -- within the rate's start grace of asking for it (limits.lua), which it can tell of a task it
  -- asked for, not of one handed over.
  if n <= 0 or limits().grace then return 0, false end
  local w = pop_live_idle(now)
  if not w then return 0, true end
  local cfg = rcall('HMGET', K.meta, 'lt', 'gr', 'dt', 'paused')
  if cfg[4] or not cfg[1] then
    rcall('SADD', K.idle, w)
    return 0, false
  end
  local opts = {lock_ttl = tonumber(cfg[1]), grace = tonumber(cfg[2]), default_timeout = tonumber(cfg[3])}
  local pushed = 0
  while w do
    local fields = {}
    if #take_tasks(w, 1, fields, now, opts) == 0 then
      rcall('SADD', K.idle, w)
      return pushed, false
    end
    local parts = {'t ', QUEUE, '\n'}
    for _, v in ipairs(fields) do
      parts[#parts + 1] = #v .. ':'
      parts[#parts + 1] = v
    end
    rcall('PUBLISH', CONTROL .. w, table.concat(parts))
    pushed = pushed + 1
    if pushed >= n then return pushed, false end
    w = pop_live_idle(now)
  end
  return pushed, true
end
