-- Add one or many tasks to the queue: runnable at the tail of pending (FIFO), on its lock's
-- wait list if that lock is held or already has a runnable task first in line, or delayed
-- until a due time. Idle workers are handed a task each inside their wake-up.
-- Keys: pending front delayed active deadlines stats meta idle unique lockwaits lockheads leases outbox blocked batchruns once limits starts partitions ring pactive pwait seen workers
-- @include take
-- @include active
-- @include resend
-- @include controls
-- Input: ARGV[3] n, ARGV[4] when: '' (runnable now), '+<ms>' (a delay) or '@<ms>' (an absolute
--   due time, Unix ms), ARGV[5] retries, ARGV[6] timeout s, ARGV[7] backoff s, ARGV[8] lock key,
--   ARGV[9] callback URL, ARGV[10] meta (opaque text), ARGV[11] trace context (W3C traceparent,
--   then tracestate after a newline; delivered with the task), ARGV[12] partition key (runnable
--   tasks are listed in their partition, served round-robin), ARGV[13] tags (one per line,
--   indexed in the tag index), ARGV[14] remember (ms; '' or 0: not): ids given by the caller
--   (the outbox's) are kept in `seen` that long, so the same id enqueued again even after its
--   task finished is a no-op, ARGV[15] parents (JSON {p: [[parent id, 'w' (still live) or its
--   outcome], ...], ob: 'run' or absent}), ARGV[16] batch id, ARGV[17] the batch this task is
--   the callback of, ARGV[18] a once key: if it was used before (7 days), nothing is added --
--   each '' when not given --, ARGV[19] '1' if the call may make the queue (else a queue that
--   does not exist yet is not made: the caller checks MAX_QUEUES first), ARGV[20] window (ms;
--   '' or 0: none): the call may be sent again within it (a retry after a lost reply), so tasks
--   that end within it stay in `ended` (resend.lua), then n quadruples: id, payload, unique key
--   ('' for none), 'b' if the payload was bytes, then the controls (each '' when not given; n is
--   1 with a throttle or debounce): expires ('+<ms>' from now or '@<ms>' Unix ms: not started by
--   then, the task never starts, expiry.lua), throttle and debounce ('<ms>' newline '<key>':
--   controls.lua; a throttled call adds nothing and answers the window's first id, a debounced
--   one replaces the payload and due time of its key's task not started yet and answers its id).
-- A task with parents still live is 'blocked' (parents:<id> lists them) until each is told
-- (resolve); one with a parent that ended badly is cancelled at once unless ob = 'run'.
-- Output: {queue_was_new (0/1), now (ms), id1, id2, ...}, or {NO_QUEUE, now} when the queue
--   does not exist and ARGV[19] is not '1' (nothing written). A unique key already held gives the
--   holder's id; an id that already exists, ended lately (`ended`: the newest 10,000, and all
--   that ended within the queue's resend window) or was remembered in `seen` within the window,
--   is left as it is (enqueue is idempotent by id).
-- Events: 'enqueued' {n, ids, delayed}, 'waiting' {ids}, 'blocked' {ids}, 'cancelled' {ids, reason}, and 'started' for tasks handed
--   straight to idle workers (one each, in their wake-up message); wakes up to n idle workers
--   in all, as many as the limits let start (or re-arms sleepers' timers for delayed tasks).
local now = now_ms()
local n = tonumber(ARGV[3])
local due = 0
if ARGV[4] ~= '' then
  due = tonumber(string.sub(ARGV[4], 2))
  if string.sub(ARGV[4], 1, 1) == '+' then due = now + due end
  if due <= now then due = 0 end
end
local lk = false
if ARGV[8] ~= '' then lk = ARGV[8] end
local opts = {}
local pk = false
if ARGV[12] ~= '' then pk = ARGV[12] end
for i, name in ipairs({'r', 't', 'b', 'lk', 'cb', 'm', 'tc', 'pk', 'tg'}) do
  if ARGV[4 + i] ~= '' then
    opts[#opts + 1] = name
    opts[#opts + 1] = ARGV[4 + i]
  end
end
if ARGV[16] ~= '' then opts[#opts + 1] = 'bt'; opts[#opts + 1] = ARGV[16] end
if ARGV[17] ~= '' then opts[#opts + 1] = 'bc'; opts[#opts + 1] = ARGV[17] end
local cx = 21 + 4 * n
local expires, throttle, debounce = ARGV[cx] or '', ARGV[cx + 1] or '', ARGV[cx + 2] or ''
if expires ~= '' then
  local ex = tonumber(string.sub(expires, 2))
  if string.sub(expires, 1, 1) == '+' then ex = now + ex end
  opts[#opts + 1] = 'ex'; opts[#opts + 1] = string.format('%.0f', ex)
end
local deps = false
if ARGV[15] ~= '' then deps = cjson.decode(ARGV[15]) end
if ARGV[19] ~= '1' and rcall('HEXISTS', K.meta, 'created') == 0 then return {@@NO_QUEUE@@, now} end
if ARGV[18] ~= '' then
  if rcall('ZSCORE', K.once, ARGV[18]) then
    local out = {0, now}
    for i = 0, n - 1 do out[#out + 1] = ARGV[21 + 4 * i] end
    return out
  end
  rcall('ZREMRANGEBYSCORE', K.once, '-inf', now - 7 * 86400000)
  rcall('ZADD', K.once, now, ARGV[18])
end
if throttle ~= '' then
  local ms, key = string.match(throttle, '^(%d+)\n(.*)$')
  local holder = throttle_holder(key, tonumber(ms), ARGV[21])
  if holder then return {0, now, holder} end
  opts[#opts + 1] = 'th'; opts[#opts + 1] = key
end
local debounce_key, debounce_ms = false, 0
if debounce ~= '' then
  local ms, key = string.match(debounce, '^(%d+)\n(.*)$')
  debounce_key, debounce_ms = key, tonumber(ms)
  local holder = debounce_replace(key, debounce_ms, ARGV[22], ARGV[24], now)
  if holder then return {0, now, holder} end
  due = now + debounce_ms
  opts[#opts + 1] = 'db'; opts[#opts + 1] = key
end
-- The parents a new task still waits for, and why it is cancelled at once (or false).
local function parents_of(id)
  local waitfor, why = {}, false
  local prk = parents_key(id)
  for _, p in ipairs(deps.p) do
    local o = p[2]
    if o == 'w' then o = rcall('HGET', prk, p[1]) or 'w' end  -- told before it existed
    if o == 'w' then
      waitfor[#waitfor + 1] = p[1]
    elseif o ~= 'completed' and deps.ob ~= 'run' and not why then
      why = 'parent ' .. p[1] .. ' ' .. o
    end
  end
  rcall('DEL', prk)
  return waitfor, why
end
local remember = tonumber(ARGV[14]) or 0
if remember > 0 then
  -- Forget ids remembered longer than the window: at most 1000 per call (each call adds at most
  -- 500), so the set never grows past the window's enqueues and no call holds Redis for long.
  local old = rcall('ZRANGEBYSCORE', K.seen, '-inf', now - remember, 'LIMIT', 0, 1000)
  if #old > 0 then rcall('ZREM', K.seen, unpack(old)) end
end
note_resend(tonumber(ARGV[20]) or 0, now)
local is_new = 0
local now_s = tostring(now)  -- once: each number handed to Redis costs it a printf
if rcall('HSETNX', K.meta, 'created', now_s) == 1 then is_new = 1 end
local out = {is_new, now}
-- Each new task is written with one HSET, its state included; the lists get one push each.
local added, runnable, waiting, blocked, delayed, dropped = {}, {}, {}, {}, {}, {}
local turn_taken = not lk  -- with a lock: whether the lock's turn was settled (one task may have it)
local state = 'pending'
if due > 0 then state = 'delayed' end
for i = 0, n - 1 do
  local j = 21 + 4 * i
  local id, payload, uk, kind = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
  local holder = false
  if uk ~= '' then holder = rcall('HGET', K.unique, uk) end
  local tk = task_key(id)
  if holder then
    out[#out + 1] = holder
  elseif rcall('EXISTS', tk) == 1 or ended_lately(id) or (remember > 0 and rcall('ZSCORE', K.seen, id)) then
    if remember > 0 then rcall('ZADD', K.seen, 'NX', now, id) end
    out[#out + 1] = id
  else
    local s = state
    local waitfor, why = {}, false
    if deps then waitfor, why = parents_of(id) end
    if why then
      s = 'cancelled'
    elseif #waitfor > 0 then
      s = 'blocked'
    elseif due == 0 and lk then
      if not turn_taken and claim_turn(lk, id) then s = 'pending' else s = 'waiting' end
      turn_taken = true
    end
    local fields = {'c', now_s}
    if s ~= 'pending' then fields[3] = 's'; fields[4] = s end  -- no 's': pending (state_of)
    add_payload(fields, payload)
    if kind ~= '' then fields[#fields + 1] = 'y'; fields[#fields + 1] = kind end
    if due > 0 then fields[#fields + 1] = 'due'; fields[#fields + 1] = due end
    if uk ~= '' then
      rcall('HSET', K.unique, uk, id)
      fields[#fields + 1] = 'u'; fields[#fields + 1] = uk
    end
    for _, v in ipairs(opts) do fields[#fields + 1] = v end
    if s == 'blocked' then
      fields[#fields + 1] = 'np'; fields[#fields + 1] = #waitfor
      if deps.ob == 'run' then fields[#fields + 1] = 'ob'; fields[#fields + 1] = 'run' end
    end
    rcall('HSET', tk, unpack(fields))
    if remember > 0 then rcall('ZADD', K.seen, now, id) end
    for t in string.gmatch(ARGV[13], '[^\n]+') do rcall('ZADD', tag_key(t), now, id) end
    if s == 'waiting' then
      waiting[#waiting + 1] = id
    elseif s == 'pending' then
      runnable[#runnable + 1] = id
    elseif s == 'delayed' then
      delayed[#delayed + 1] = id
    elseif s == 'blocked' then
      local prk = parents_key(id)
      for _, pid in ipairs(waitfor) do rcall('HSET', prk, pid, 'w') end
      blocked[#blocked + 1] = id
    else  -- a parent ended badly: cancelled at once (its batch is told)
      clear_unique(id, uk ~= '' and uk or nil)
      task_ended(id, tk, 'cancelled', now, nil, why)
      forget(id, tk)
      rcall('DEL', tk)
      dropped[#dropped + 1] = id
      publish({e = 'cancelled', ids = {id}, n = 1, reason = why})
    end
    added[#added + 1] = id
    out[#out + 1] = id
  end
end
if debounce_key and #added > 0 then debounce_hold(debounce_key, debounce_ms, added[1]) end
local function push_all(key, ids)
  for i = 1, #ids, 1000 do rcall('RPUSH', key, unpack(ids, i, math.min(i + 999, #ids))) end
end
if #added > 0 then
  rcall('HINCRBY', K.stats, 'enqueued', #added)
  publish({e = 'enqueued', n = #added, ids = added, delayed = due > 0})
  if #dropped > 0 then rcall('HINCRBY', K.stats, 'cancelled', #dropped) end
  if #blocked > 0 then
    for i = 1, #blocked, 1000 do
      local args = {}
      for k = i, math.min(i + 999, #blocked) do args[#args + 1] = now; args[#args + 1] = blocked[k] end
      rcall('ZADD', K.blocked, unpack(args))
    end
    rcall('HINCRBY', K.stats, 'blocked', #blocked)
    publish({e = 'blocked', ids = blocked, n = #blocked})
  end
  if #delayed > 0 then
    local earliest = next_due()
    for i = 1, #delayed, 1000 do
      local args = {}
      for k = i, math.min(i + 999, #delayed) do args[#args + 1] = due; args[#args + 1] = delayed[k] end
      rcall('ZADD', K.delayed, unpack(args))
    end
    if earliest < 0 or due < earliest then wake_for_due(due, now) end
  end
  if #waiting > 0 then
    push_all(lock_wait_key(lk), waiting)
    rcall('HINCRBY', K.stats, 'waiting', #waiting)
    rcall('ZADD', K.lockwaits, 'NX', recheck_at(lk, now), lk)
    publish({e = 'waiting', ids = waiting, n = #waiting})
  end
  if #runnable > 0 then
    local n = #runnable
    if pk then
      push_all(plist_key(pk), runnable)
      rcall('HINCRBY', K.stats, 'plisted', n)
      if not ring_partition(pk) then n = 0 end  -- held back by its partition's limits
    else
      push_all(K.pending, runnable)
    end
    local room = queue_room(now)
    if room < n then n = room end
    -- Idle workers get a task each in the wake-up itself; the rest of them are just woken.
    local pushed, none_idle = push_to_idle(n, now)
    if not none_idle then wake(n - pushed) end
  end
end
return out
