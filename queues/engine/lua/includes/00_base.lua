-- Shared prelude of every script: key names, time, events and wake-ups.
-- KEYS are the queue's keys in keys.QUEUE_KINDS order; ARGV[1] is the queue's key prefix
-- ("worqr:{<queue>}:") and ARGV[2] the queue name. Names of per-task, per-lock and per-worker
-- keys are built from that prefix with the kind names that the loader fills in from keys.py.
local rcall = redis.call
local K = {
  pending = KEYS[1], delayed = KEYS[2], active = KEYS[3], deadlines = KEYS[4],
  failed = KEYS[5], failures = KEYS[6], stats = KEYS[7], throughput = KEYS[8],
  meta = KEYS[9], workers = KEYS[10], idle = KEYS[11], unique = KEYS[12],
  lockwaits = KEYS[13], results = KEYS[14], durations = KEYS[15],
}
local PREFIX = ARGV[1]
local QUEUE = ARGV[2]
local EVENTS = PREFIX .. 'events'
local CONTROL = '@@CONTROL_PREFIX@@'

local function now_ms()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function task_key(id) return PREFIX .. 'task:' .. id end
local function lock_key(lk) return PREFIX .. 'lock:' .. lk end
local function lock_wait_key(lk) return PREFIX .. 'lockwait:' .. lk end
local function worker_tasks_key(w) return PREFIX .. 'worker:' .. w end

-- Publish one event (a table) on the queue's event channel. Lists of ids are capped so a
-- bulk transition stays one small message; 'n' always carries the full count.
local function publish(event)
  event.q = QUEUE
  if event.ids and #event.ids == 0 then event.ids = nil end  -- cjson would write {} for it
  if event.ids and #event.ids > 50 then
    local head = {}
    for i = 1, 50 do head[i] = event.ids[i] end
    event.ids = head
    event.more = true
  end
  rcall('PUBLISH', EVENTS, cjson.encode(event))
end

-- Tell up to n idle workers of this queue that work is there. A worker leaves the idle set
-- when woken and re-enters it (atomically, in start) only when it finds nothing to do.
local function wake(n)
  if n <= 0 then return end
  local ws = rcall('SPOP', K.idle, n)
  for _, w in ipairs(ws) do rcall('PUBLISH', CONTROL .. w, 'w ' .. QUEUE) end
end

-- Tell every idle worker that the earliest due time changed (they sleep until it); the
-- message carries the time left in ms.
local function wake_for_due(due)
  local left = math.max(0, due - now_ms())
  for _, w in ipairs(rcall('SMEMBERS', K.idle)) do
    rcall('PUBLISH', CONTROL .. w, 'd ' .. QUEUE .. ' ' .. left)
  end
end

-- The earliest due time of a delayed task, or -1.
local function next_due()
  local first = rcall('ZRANGE', K.delayed, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return -1
end

-- Put a delayed task in the sorted set, and wake sleepers if it is now the earliest.
local function delay_task(id, tk, due)
  local earliest = next_due()
  rcall('ZADD', K.delayed, due, id)
  rcall('HSET', tk, 's', 'delayed', 'due', due)
  if earliest < 0 or due < earliest then wake_for_due(due) end
end

-- Count one finished ('c') or failed ('f') attempt in this minute's bucket; buckets older
-- than 24 h are dropped as new minutes begin, so the hash stays bounded.
local function count_minute(kind, now, n)
  local m = math.floor(now / 60000)
  if rcall('HINCRBY', K.throughput, kind .. m, n) == n then
    rcall('HDEL', K.throughput, kind .. (m - 1440))
    if rcall('HLEN', K.throughput) > 2 * 1440 + 16 then
      for _, f in ipairs(rcall('HKEYS', K.throughput)) do
        if tonumber(string.sub(f, 2)) <= m - 1440 then rcall('HDEL', K.throughput, f) end
      end
    end
  end
end

-- Run durations, as a histogram (bounds in seconds, written as Python's '%g' writes them).
local DURATION_BOUNDS = {
  {0.005, '0.005'}, {0.01, '0.01'}, {0.025, '0.025'}, {0.05, '0.05'}, {0.1, '0.1'},
  {0.25, '0.25'}, {0.5, '0.5'}, {1, '1'}, {2.5, '2.5'}, {5, '5'}, {10, '10'}, {30, '30'},
  {60, '60'}, {300, '300'}, {900, '900'}, {3600, '3600'},
}

-- Add the runs (a list of durations in seconds) to the queue's histogram in a few commands.
local function record_durations(runs)
  if #runs == 0 then return end
  local per, total = {}, 0
  for _, d in ipairs(runs) do
    local field = 'le:+Inf'
    for _, b in ipairs(DURATION_BOUNDS) do
      if d <= b[1] then field = 'le:' .. b[2]; break end
    end
    per[field] = (per[field] or 0) + 1
    total = total + d
  end
  for field, n in pairs(per) do rcall('HINCRBY', K.durations, field, n) end
  rcall('HINCRBY', K.durations, 'count', #runs)
  rcall('HINCRBYFLOAT', K.durations, 'sum', total)
end
