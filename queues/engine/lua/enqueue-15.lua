-- Add one or many tasks to the queue: pending at the tail (FIFO), or delayed until a due time.
-- Input:
--   KEYS  the queue's keys (keys.QUEUE_KINDS order)
--   ARGV[1] prefix, ARGV[2] queue, ARGV[3] n, ARGV[4] when: '' (runnable now), '+<ms>' (a delay)
--   or '@<ms>' (an absolute due time, Unix ms),
--   ARGV[5] retries, ARGV[6] timeout s, ARGV[7] backoff s, ARGV[8] lock key,
--   ARGV[9] callback URL, ARGV[10] meta (opaque text) -- each '' when not given --
--   then n quadruples: id, payload, unique key ('' for none), 'b' if the payload was bytes.
-- Output: {queue_was_new (0/1), id1, id2, ...}; a unique key already held returns the holder's id.
-- Events: 'enqueued' {n, ids, delayed}, and 'started' for tasks handed straight to idle workers
-- (one each, in their wake-up message); wakes up to n idle workers in all (or re-arms sleepers'
-- timers for delayed tasks).
local now = now_ms()
local n = tonumber(ARGV[3])
local due = 0
if ARGV[4] ~= '' then
  due = tonumber(string.sub(ARGV[4], 2))
  if string.sub(ARGV[4], 1, 1) == '+' then due = now + due end
  if due <= now then due = 0 end
end
local opts = {}
for i, name in ipairs({'r', 't', 'b', 'lk', 'cb', 'm'}) do
  if ARGV[4 + i] ~= '' then
    opts[#opts + 1] = name
    opts[#opts + 1] = ARGV[4 + i]
  end
end
local is_new = 0
if rcall('HSETNX', K.meta, 'created', now) == 1 then is_new = 1 end
local out = {is_new}
local added = {}
for i = 0, n - 1 do
  local j = 11 + 4 * i
  local id, payload, uk, kind = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
  local holder = false
  if uk ~= '' then holder = rcall('HGET', K.unique, uk) end
  if holder then
    out[#out + 1] = holder
  else
    local tk = task_key(id)
    rcall('HSET', tk, 'p', payload, 'c', now, 's', 'pending')
    if kind ~= '' then rcall('HSET', tk, 'y', kind) end
    if #opts > 0 then rcall('HSET', tk, unpack(opts)) end
    if uk ~= '' then
      rcall('HSET', K.unique, uk, id)
      rcall('HSET', tk, 'u', uk)
    end
    if due > 0 then
      delay_task(id, tk, due)
    else
      rcall('RPUSH', K.pending, id)
    end
    added[#added + 1] = id
    out[#out + 1] = id
  end
end
if #added > 0 then
  rcall('HINCRBY', K.stats, 'enqueued', #added)
  publish({e = 'enqueued', n = #added, ids = added, delayed = due > 0})
  if due == 0 then
    -- Idle workers get a task each in the wake-up itself; the rest of them are just woken.
    local pushed = push_to_idle(#added)
    wake(#added - pushed)
  end
end
return out
