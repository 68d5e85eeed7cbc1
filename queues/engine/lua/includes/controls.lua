-- @include base
-- Throttle and debounce (enqueue(..., throttle=/debounce=(key, seconds))), one key per window:
-- `throttle:<key>` and `debounce:<key>` (strings holding a task id, with an expiry), both in
-- the queue's slot. Each is decided inside the enqueue script, so concurrent producers agree.

-- Throttle: the first enqueue with `key` starts a window of `ms` and adds its task; within it
-- every enqueue adds nothing and gets the first one's id. Returns that id, or false (then the
-- caller adds task id, which now holds the window).
local function throttle_holder(key, ms, id)
  local tk = PREFIX .. '@@throttle@@:' .. key
  local holder = rcall('GET', tk)
  if holder then return holder end
  rcall('SET', tk, id, 'PX', ms)
  return false
end

-- How long a debounce key outlives its quiet period (ms): a task due but not yet taken (no
-- worker, a paused queue) is still found and replaced meanwhile.
local DEBOUNCE_KEEP_MS = 3600000

-- Debounce: the one task of `key` not started yet (delayed until `ms` after the last enqueue)
-- gets `payload` (kind 'b' if bytes) and the new due time now + ms; returns its id. Returns
-- false when there is none (or it has started): the caller adds a new delayed task and names
-- it with debounce_hold.
local function debounce_replace(key, ms, payload, kind, now)
  local holder = rcall('GET', PREFIX .. '@@debounce@@:' .. key)
  if not holder then return false end
  local tk = task_key(holder)
  if rcall('HGET', tk, 's') ~= 'delayed' then return false end
  rcall('HDEL', tk, 'y', @@payload_fields@@, @@payload_more_fields@@)
  local fields = {'due', now + ms}
  add_payload(fields, payload)
  if kind ~= '' then fields[#fields + 1] = 'y'; fields[#fields + 1] = kind end
  rcall('HSET', tk, unpack(fields))
  rcall('ZADD', K.delayed, now + ms, holder)
  rcall('PEXPIRE', PREFIX .. '@@debounce@@:' .. key, ms + DEBOUNCE_KEEP_MS)
  publish({e = 'debounced', ids = {holder}, n = 1})
  return holder
end

local function debounce_hold(key, ms, id)
  rcall('SET', PREFIX .. '@@debounce@@:' .. key, id, 'PX', ms + DEBOUNCE_KEEP_MS)
end
