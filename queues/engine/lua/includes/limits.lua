-- @include wake
-- Limits (README "Limits"): the queue's concurrency and rate, and per partition. Counted by the
-- scripts that start and end tasks: the queue's active set is its concurrency count, 'pactive'
-- each partition's; the rate is a sliding window log of starts ('starts', 'pstarts:<key>').
-- A task held back stays where it is listed: nothing re-scans it. Workers are woken when a slot
-- frees, and sleep until the window opens otherwise (a due time, as for delayed tasks).
-- Partitioned tasks are listed per partition (plist:<key>); the runnable partitions wait in
-- 'ring' and are served one task per turn (round-robin). Every step here is O(1) or O(log n).

-- The queue's kept slots: '<id>:<lease>' -> partition key ('' for none) of each handler still
-- running after its outcome was recorded (a timeout, a cancel of a sync handler). It keeps its
-- place under the queue's concurrency and its partition's (pactive) until it really returns.
-- Built from the prefix (keys.py "kept"), as '@@ended@@' is, so no script's keys change.
local KEPT = PREFIX .. '@@kept@@'
-- The partitions a handler's RateLimited holds back: partition key -> until when (ms); the
-- queue's own hold is the field 'hu' of `limits` (holds.lua). Built from the prefix, as KEPT is.
local HOLDS = PREFIX .. '@@holds@@'

local function plist_key(pk) return PREFIX .. '@@plist@@:' .. pk end
local function pstarts_key(pk) return PREFIX .. '@@pstarts@@:' .. pk end

-- A rate's start grace (ms) for its window w (limits.start_grace_ms): a worker starts a handler
-- of a rate-limited queue within it of asking, or gives the task back unstarted, and starts are
-- counted over w + the grace, so that no window w of the handlers' own clock sees more than the
-- rate's starts (README "Limits").
local function start_grace(w)
  return math.min(@@start_grace_max_ms@@, math.max(@@start_grace_min_ms@@, math.ceil(w / @@start_grace_divisor@@)))
end

-- The limits in force: {c, rn, rw, pc, prn, prw}, each nil when not set, the windows rw and prw
-- with their start grace added (what starts are counted over), and grace: the smaller grace of
-- the rates set (nil: none). Read once per call.
local LIMITS = nil
local function limits()
  if not LIMITS then
    local f = rcall('HMGET', K.limits, 'c', 'rn', 'rw', 'pc', 'prn', 'prw', 'ro', 'hu')
    LIMITS = {
      c = tonumber(f[1]), rn = tonumber(f[2]), rw = tonumber(f[3]),
      pc = tonumber(f[4]), prn = tonumber(f[5]), prw = tonumber(f[6]), ro = tonumber(f[7]),
      hu = tonumber(f[8]),
    }
    for _, w in ipairs({'rw', 'prw'}) do
      local v = LIMITS[w]
      if v then
        local g = start_grace(v)
        LIMITS[w] = v + g
        if not LIMITS.grace or g < LIMITS.grace then LIMITS.grace = g end
      end
    end
  end
  return LIMITS
end

-- Work out the limits in force from the handler's values (as workers registered them) and the
-- operator's overrides ('-': none), field by field: an override wins while it is set.
local LIMIT_FIELDS = {'c', 'rn', 'rw', 'pc', 'prn', 'prw'}
local function settle_limits()
  local names = {}
  for _, name in ipairs(LIMIT_FIELDS) do names[#names + 1] = 'h' .. name end
  for _, name in ipairs(LIMIT_FIELDS) do names[#names + 1] = 'o' .. name end
  local f = rcall('HMGET', K.limits, unpack(names))
  for i, name in ipairs(LIMIT_FIELDS) do
    local v = f[#LIMIT_FIELDS + i] or f[i]
    if v and v ~= '-' and v ~= '' then rcall('HSET', K.limits, name, v) else rcall('HDEL', K.limits, name) end
  end
  LIMITS = nil
end

-- Starts in the window ending now of the log `key` (entries older than `window` ms dropped).
local function starts_in(key, window, now)
  rcall('ZREMRANGEBYSCORE', key, '-inf', now - window)
  return rcall('ZCARD', key)
end

-- When the window of log `key` opens again (its oldest start leaves it), ms.
local function window_opens(key, window)
  local first = rcall('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) + window end
  return 0
end

-- The handlers counted under the queue's concurrency: its active tasks and its kept slots.
local function running_count()
  return rcall('ZCARD', K.active) + rcall('HLEN', KEPT)
end

-- How many more tasks of the queue may start now (math.huge without queue limits), and the time
-- the rate window opens when the rate is what holds them back (else 0).
local function queue_room(now)
  local L = limits()
  if L.hu then  -- held by a handler's RateLimited until then: nothing starts (holds.lua)
    if L.hu > now then return 0, L.hu end
    rcall('HDEL', K.limits, 'hu')
    L.hu = nil
  end
  local room, opens = math.huge, 0
  if L.c then room = L.c - running_count() end
  if L.rn and L.rw then
    local rate_room = L.rn - starts_in(K.starts, L.rw, now)
    if rate_room <= 0 and room > 0 then opens = window_opens(K.starts, L.rw) end
    if rate_room < room then room = rate_room end
  end
  if room < 0 then room = 0 end
  return room, opens
end

-- Remember when the queue's rate window opens while it holds tasks back (opens > 0), telling
-- sleeping workers once per window; forget it once it no longer does.
local function note_rate_hold(opens, now)
  local L = limits()
  if opens > 0 then
    if L.ro ~= opens then
      rcall('HSET', K.limits, 'ro', opens)
      L.ro = opens
      wake_for_due(opens, now)
    end
  elseif L.ro then
    rcall('HDEL', K.limits, 'ro')
    L.ro = nil
  end
end

-- Whether a task of partition pk may start now: true; or false and 'b' (its concurrency is
-- used up) or the time its rate window opens.
local function partition_open(pk, now)
  local L = limits()
  local held = tonumber(rcall('HGET', HOLDS, pk) or '')
  if held then
    if held > now then return false, held end
    rcall('HDEL', HOLDS, pk)
  end
  if L.pc and tonumber(rcall('ZSCORE', K.pactive, pk) or '0') >= L.pc then return false, 'b' end
  if L.prn and L.prw then
    local sk = pstarts_key(pk)
    if starts_in(sk, L.prw, now) >= L.prn then return false, window_opens(sk, L.prw) end
  end
  return true
end

-- A task starts under lease: count it in the logs of the rates in force and in its partition.
local function count_start(pk, lease, now)
  local L = limits()
  if L.rn and L.rw then
    rcall('ZADD', K.starts, now, lease)
    rcall('PEXPIRE', K.starts, L.rw)
  end
  if pk then
    rcall('ZINCRBY', K.pactive, 1, pk)
    if L.prn and L.prw then
      local sk = pstarts_key(pk)
      rcall('ZADD', sk, now, lease)
      rcall('PEXPIRE', sk, L.prw)
    end
  end
end

-- A start counted under lease never happened (its handler was not run): out of the logs.
local function uncount_start(pk, lease)
  rcall('ZREM', K.starts, lease)
  if pk then rcall('ZREM', pstarts_key(pk), lease) end
end

-- Put partition pk in the ring unless it is there or held back. Returns true if it is runnable.
local function ring_partition(pk)
  local s = rcall('HGET', K.partitions, pk)
  if s == 'r' then return true end
  if s then return false end
  rcall('HSET', K.partitions, pk, 'r')
  rcall('RPUSH', K.ring, pk)
  return true
end

-- List a runnable task in its partition: last, or first (a task given back, a lock's turn).
local function list_in_partition(id, pk, first)
  if first then rcall('LPUSH', plist_key(pk), id) else rcall('RPUSH', plist_key(pk), id) end
  rcall('HINCRBY', K.stats, 'plisted', 1)
  return ring_partition(pk)
end

-- The next partitioned task to start, from the ring's head partition: its id; false if that
-- partition is held back (it leaves the ring until a slot frees or its window opens) or its
-- entry was stale; nil when the ring is empty. The partition goes to the ring's tail while it
-- has tasks listed.
local function next_partitioned(now)
  local pk = rcall('LPOP', K.ring)
  if not pk then return nil end
  if rcall('HGET', K.partitions, pk) ~= 'r' then return false end
  local ok, why = partition_open(pk, now)
  if not ok then
    if why == 'b' then
      rcall('HSET', K.partitions, pk, 'b')
    else
      rcall('HSET', K.partitions, pk, 'w')
      local first = rcall('ZRANGE', K.pwait, 0, 0, 'WITHSCORES')
      rcall('ZADD', K.pwait, why, pk)
      if not first[2] or why < tonumber(first[2]) then wake_for_due(why, now) end
    end
    return false
  end
  local lk = plist_key(pk)
  local id = rcall('LPOP', lk)
  if id then rcall('HINCRBY', K.stats, 'plisted', -1) end
  if rcall('LLEN', lk) > 0 then rcall('RPUSH', K.ring, pk) else rcall('HDEL', K.partitions, pk) end
  return id or false
end

-- Partitions whose rate window opened go back to the ring (at most 100 per call).
local function promote_partitions(now)
  local due = rcall('ZRANGEBYSCORE', K.pwait, '-inf', now, 'LIMIT', 0, 100)
  for _, pk in ipairs(due) do
    rcall('ZREM', K.pwait, pk)
    if rcall('HGET', K.partitions, pk) == 'w' then
      rcall('HSET', K.partitions, pk, 'r')
      rcall('RPUSH', K.ring, pk)
    end
  end
end

-- Partitions parked by their concurrency ('b') that the limits in force let run again (their
-- partition concurrency was raised or lifted) go back to the ring, in name order. A parked
-- partition has active tasks (it was parked at its limit and leaves 'b' when one of them ends),
-- so it is in pactive: at most 1,000 entries are looked at, those with the most active tasks
-- below the limit first; any other parked partition comes back when one of its tasks ends.
-- Returns how many went back.
local function unpark_partitions()
  local pc = limits().pc
  local looked
  if pc then
    looked = rcall('ZREVRANGEBYSCORE', K.pactive, '(' .. pc, '-inf', 'LIMIT', 0, 1000)
  else
    looked = rcall('ZREVRANGE', K.pactive, 0, 999)
  end
  table.sort(looked)
  local n = 0
  for _, pk in ipairs(looked) do
    if rcall('HGET', K.partitions, pk) == 'b' then
      rcall('HSET', K.partitions, pk, 'r')
      rcall('RPUSH', K.ring, pk)
      n = n + 1
    end
  end
  return n
end

-- The earliest time something held back by a rate may start (a partition's window or the
-- queue's), or -1.
local function next_window()
  local first = rcall('ZRANGE', K.pwait, 0, 0, 'WITHSCORES')
  local at = -1
  if first[2] then at = tonumber(first[2]) end
  local ro = tonumber(rcall('HGET', K.limits, 'ro') or '')
  if ro and (at < 0 or ro < at) then at = ro end
  return at
end

-- Runnable tasks listed (an upper bound: entries of removed tasks included) outside lock lists.
local function listed_runnable()
  return rcall('LLEN', K.front) + rcall('LLEN', K.pending) + rcall('LLEN', K.ring)
end

-- A task of partition pk (or none) left the active state: its partition's count goes down, and
-- a partition held back by its concurrency goes back to the ring. If that freed a slot that
-- held tasks back (the partition's, or the queue's at its concurrency), an idle worker is woken.
local function limits_left(pk)
  local wakeup = false
  if pk then
    if tonumber(rcall('ZINCRBY', K.pactive, -1, pk)) <= 0 then rcall('ZREM', K.pactive, pk) end
    if rcall('HGET', K.partitions, pk) == 'b' then
      rcall('HSET', K.partitions, pk, 'r')
      rcall('RPUSH', K.ring, pk)
      wakeup = true
    end
  end
  local L = limits()
  if not wakeup and L.c and running_count() == L.c - 1 and listed_runnable() > 0 then wakeup = true end
  if wakeup then wake(1) end
end

-- A task of partition pk (or none) left the active state while its handler still runs (its
-- outcome recorded first): delivery `holder` keeps its slots, the queue's and its partition's,
-- until worker w says the handler returned or w's death does (release_slot). w's held hash
-- lists it ('' when it keeps no lock) so that its death finds it.
local function keep_slot(holder, pk, w)
  rcall('HSET', KEPT, holder, pk or '')
  rcall('HSETNX', held_key(w), holder, '')
end

-- The handler of delivery `holder` has really stopped: the slots it kept (if any) are freed,
-- as limits_left does for a task leaving the active state.
local function release_slot(holder)
  local pk = rcall('HGET', KEPT, holder)
  if not pk then return end
  rcall('HDEL', KEPT, holder)
  if pk == '' then pk = nil end
  limits_left(pk)
end
