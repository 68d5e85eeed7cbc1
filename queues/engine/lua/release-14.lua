-- A worker's handlers whose outcome was recorded while they still ran (a timeout, a cancel of a
-- sync handler) have now really stopped: release the locks it kept for them, so the next task
-- waiting on each lock may run. Locks no longer held by those deliveries are left alone.
-- Keys: pending front delayed active stats idle lockwaits lockheads limits starts partitions ring pactive pwait
-- @include locks
-- Input: ARGV[3] worker, ARGV[4] n, then n pairs: id, lease
-- Output: 1
-- Events: none (a promoted waiter wakes a worker)
local worker, n = ARGV[3], tonumber(ARGV[4])
local holders = {}
for i = 0, n - 1 do holders[#holders + 1] = ARGV[5 + 2 * i] .. ':' .. ARGV[6 + 2 * i] end
release_held(worker, holders, now_ms())
return 1
