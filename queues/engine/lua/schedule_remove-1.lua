-- Remove a schedule (gone from the settings a worker synced, or moved to another queue): its
-- settings and state. Tasks it enqueued stay.
-- Keys: schedules
-- @include base
-- Input: ARGV[3] name
-- Output: 1 if it existed, else 0
-- Events: 'schedule_removed' {schedule}
local name = ARGV[3]
local existed = rcall('ZREM', K.schedules, name)
rcall('DEL', PREFIX .. '@@schedule@@:' .. name)
if existed == 1 then publish({e = 'schedule_removed', schedule = name}) end
return existed
