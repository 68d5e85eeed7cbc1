-- Pass a wake-up on: a worker told of new work while it has no free slot hands the news to up
-- to n other idle workers (never more than there are runnable tasks).
-- Keys: pending front delayed idle
-- @include wake
-- Input: ARGV[3] n
-- Output: number of workers woken
local n = math.min(tonumber(ARGV[3]), rcall('LLEN', K.front) + rcall('LLEN', K.pending))
local before = rcall('SCARD', K.idle)
wake(n)
return before - rcall('SCARD', K.idle)
