-- @include base
-- Enqueue is idempotent by id: an id whose task exists, or ended lately, is not added again.
-- A producer whose reply was lost sends its call again (for up to its window: ENQUEUE_RETRY_FOR
-- plus a socket timeout); meanwhile the first call's task may have run and ended. So the record
-- of ended tasks (`ended`, keys.py) keeps, beyond its newest @@ended_max@@, every task that ended
-- within the longest window a producer of the queue sent a call with lately (`resend`).

local ENDED = PREFIX .. '@@ended@@'
local RESEND = PREFIX .. '@@resend@@'

-- Whether task id of this queue ended lately (its outcome is in `ended`; the member is the id's
-- 16 hex digits, the queue going without saying).
local function ended_lately(id)
  return rcall('ZSCORE', ENDED, string.sub(id, -16)) ~= false
end

-- This call may be sent again within `window` ms: tasks that end within it stay in `ended`.
-- Written only when the window's entry would lapse within the window (then for twice it), so a
-- busy producer writes once per window, not once per call; entries past their time go then
-- (the key has no expiry: a quiet queue keeps its last entry, ~100 bytes, as it keeps `meta`).
local function note_resend(window, now)
  if window <= 0 then return end
  local till = tonumber(rcall('ZSCORE', RESEND, window) or '0')
  if till >= now + window then return end
  rcall('ZREMRANGEBYSCORE', RESEND, '-inf', now)
  rcall('ZADD', RESEND, now + 2 * window, window)
end

-- The longest window (ms) within which a call of the queue may still be sent again (0: none).
local function resend_window(now)
  local w = 0
  for _, v in ipairs(rcall('ZRANGEBYSCORE', RESEND, now, '+inf')) do
    if tonumber(v) > w then w = tonumber(v) end
  end
  return w
end

-- Trim `ended` (once per script call): older than a day go; beyond the newest @@ended_max@@, the
-- oldest go too, but none that ended within resend_window, and at most @@ended_trim_max@@ per call.
local function trim_ended(now)
  rcall('ZREMRANGEBYSCORE', ENDED, '-inf', '(' .. string.format('%.0f', (now - @@ended_keep_ms@@) * 4))
  local over = rcall('ZCARD', ENDED) - @@ended_max@@
  if over > 0 then
    local spared = string.format('%.0f', (now - resend_window(now)) * 4)
    local n = math.min(over, rcall('ZCOUNT', ENDED, '-inf', '(' .. spared), @@ended_trim_max@@)
    if n > 0 then rcall('ZREMRANGEBYRANK', ENDED, 0, n - 1) end
  end
  rcall('PEXPIRE', ENDED, @@ended_keep_ms@@)  -- a queue that goes quiet forgets its record a day later
end
