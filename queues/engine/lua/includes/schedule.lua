-- @include take
-- @include bounds
-- Periodic tasks. A schedule is one hash, schedule:<name> (its synced settings 'spec', their
-- version 'v', and its state), in the slot of the queue its runs go to; its next run is its
-- score in the queue's 'schedules' zset ('+inf' while paused or disabled).

local function schedule_key(name) return PREFIX .. '@@schedule@@:' .. name end

-- The next run of a score as replies give it: ms, or -1 when it has none (paused, disabled).
local function next_run(score)
  if not score then return -1 end
  local n = tonumber(score)
  if n == nil or n == math.huge then return -1 end
  return n
end

-- Whether the schedule's last run is still waiting or running (pending, delayed, waiting for a
-- lock, or active): its task hash is in this slot too.
local function last_run_live(sk)
  local id = rcall('HGET', sk, 'last_id')
  if not id then return false end
  local f = rcall('HMGET', task_key(id), 's', 'c')
  local s = state_of(f[1], f[2])
  return s == 'pending' or s == 'delayed' or s == 'waiting' or s == 'active'
end

-- Lateness of on-time runs, as a histogram in the schedule's hash: 'le:<bound s>' counts (not
-- cumulative), 'late_count' and 'late_sum' (s). The bounds are those of run durations.
local function record_lateness(sk, late_ms)
  local s = late_ms / 1000
  rcall('HINCRBY', sk, bin_field(duration_bin(s)), 1)
  rcall('HINCRBY', sk, 'late_count', 1)
  rcall('HINCRBYFLOAT', sk, 'late_sum', s)
end

-- Enqueue one run of a schedule as task `id`, runnable now, like any enqueue: at the tail of
-- pending (or on its lock's wait list), handed to an idle worker or waking one, with the
-- 'enqueued' event. `spec` is the decoded settings; `meta` tells the handler which tick it is;
-- `tc` is the trace context of whoever caused the run ('' or nil: none). Records it as the
-- schedule's last run. Returns 1 if the queue was new, else 0.
local function add_run(name, sk, spec, id, meta, kind, tick, now, tc)
  local tk = task_key(id)
  local fields = {'c', now, 'm', meta}
  add_payload(fields, spec.payload)
  rcall('HSET', tk, unpack(fields))
  if tc and tc ~= '' then rcall('HSET', tk, 'tc', tc) end
  for f, v in pairs(spec.opts) do rcall('HSET', tk, f, v) end
  local is_new = rcall('HSETNX', K.meta, 'created', now)
  rcall('HINCRBY', K.stats, 'enqueued', 1)
  publish({e = 'enqueued', n = 1, ids = {id}, delayed = false, schedule = name})
  if make_runnable(id, tk, spec.opts.lk or false, 'tail', now) then
    if push_to_idle(1, now) == 0 then wake(1) end
  else
    publish({e = 'waiting', ids = {id}, n = 1})
  end
  rcall('HSET', sk, 'last', now, 'last_id', id, 'last_kind', kind, 'last_tick', tick)
  return is_new
end
