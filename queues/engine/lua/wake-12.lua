-- Pass a wake-up on: a worker told of new work while it has no free slot hands the news to up
-- to n other idle workers (never more than there are runnable tasks, or than the limits let start).
-- Keys: pending front delayed active stats idle limits starts partitions ring pactive pwait
-- @include limits
-- Input: ARGV[3] n
-- Output: number of workers woken
local n = math.min(tonumber(ARGV[3]), listed_runnable(), (queue_room(now_ms())))
local before = rcall('SCARD', K.idle)
wake(n)
return before - rcall('SCARD', K.idle)
