-- Pause or resume the queue. Paused, enqueues are still accepted but no task starts (start
-- checks the flag in the same step it would take a task). Resuming wakes every idle worker.
-- Keys: delayed meta idle
-- @include wake
-- Input: ARGV[3] '1' to pause, '0' to resume
-- Output: 1 if the state changed, 0 if it already was so
-- Events: 'paused' | 'resumed'
local changed
if ARGV[3] == '1' then
  local now = now_ms()
  rcall('HSETNX', K.meta, 'created', now)
  changed = rcall('HSETNX', K.meta, 'paused', now)
  if changed == 1 then publish({e = 'paused'}) end
else
  changed = rcall('HDEL', K.meta, 'paused')
  if changed == 1 then
    publish({e = 'resumed'})
    wake(rcall('SCARD', K.idle))
  end
end
return changed
