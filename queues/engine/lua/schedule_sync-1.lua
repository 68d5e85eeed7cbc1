-- Write a schedule's settings as a worker synced them at its start: a new schedule starts at its
-- next tick; a changed one (another version) moves to the next tick of its new settings and
-- keeps its pause state, last run and counters; an unchanged one is left as it is.
-- Keys: schedules
-- @include base
-- Input: ARGV[3] name, ARGV[4] settings (JSON), ARGV[5] their version, ARGV[6] the first tick
--   after now (ms) by these settings, ARGV[7] '1' if enabled, ARGV[8] paused since (ms) for a
--   new schedule that was paused in another queue before ('' if not)
-- Output: 0 unchanged, 1 created, 2 changed
-- Events: 'schedule_synced' {schedule, created}
local name = ARGV[3]
local sk = PREFIX .. '@@schedule@@:' .. name
local score = rcall('ZSCORE', K.schedules, name)
local v = rcall('HGET', sk, 'v')
if score and v == ARGV[5] then return 0 end
local created = (not score) or (not v)
if created and ARGV[8] ~= '' then rcall('HSET', sk, 'paused', ARGV[8]) end
local now = now_ms()
rcall('HSET', sk, 'spec', ARGV[4], 'v', ARGV[5], 'synced', now)
if ARGV[7] == '1' and rcall('HEXISTS', sk, 'paused') == 0 then
  rcall('ZADD', K.schedules, ARGV[6], name)
else
  rcall('ZADD', K.schedules, '+inf', name)
end
publish({e = 'schedule_synced', schedule = name, created = created})
if created then return 1 end
return 2
