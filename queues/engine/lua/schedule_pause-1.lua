-- Pause or resume a schedule, durably. Paused, it has no next run (its ticks pass without runs;
-- trigger still works); resumed, it runs from its next tick after now (no catch-up).
-- Keys: schedules
-- @include base
-- Input: ARGV[3] name, ARGV[4] '1' to pause, '0' to resume, ARGV[5] the settings version the
--   caller computed the next tick with, ARGV[6] that next tick (ms)
-- Output: 1 if the state changed, 0 if it already was so, UNKNOWN, or STALE (the settings
--   changed meanwhile: compute the next tick again)
-- Events: 'schedule_paused' | 'schedule_resumed' {schedule}
local name = ARGV[3]
local sk = PREFIX .. '@@schedule@@:' .. name
local v = rcall('HGET', sk, 'v')
if not v or not rcall('ZSCORE', K.schedules, name) then return @@UNKNOWN@@ end
if ARGV[4] == '1' then
  if rcall('HSETNX', sk, 'paused', now_ms()) == 0 then return 0 end
  rcall('ZADD', K.schedules, '+inf', name)
  publish({e = 'schedule_paused', schedule = name})
  return 1
end
if rcall('HEXISTS', sk, 'paused') == 0 then return 0 end
if v ~= ARGV[5] then return @@STALE@@ end
rcall('HDEL', sk, 'paused')
if cjson.decode(rcall('HGET', sk, 'spec')).enabled then rcall('ZADD', K.schedules, ARGV[6], name) end
publish({e = 'schedule_resumed', schedule = name})
return 1
