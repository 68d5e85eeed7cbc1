-- Run a delayed task now: take it off delayed and make it runnable at once, at the head of
-- front (before every pending task) or at the tail of pending, as a due task would be (on its
-- lock's wait list if the lock is taken). Refused for a task that is no longer delayed.
-- Keys: pending front delayed active stats idle lockwaits lockheads limits starts partitions ring pactive pwait
-- @include locks
-- Input: ARGV[3] 'front' or 'tail', ARGV[4] the id
-- Output: REQUEUED, UNKNOWN (no such task) or NOT_DELAYED
-- Events: 'promoted' {n = 1, ids}
local where, id = ARGV[3], ARGV[4]
local tk = task_key(id)
local f = rcall('HMGET', tk, 's', 'lk', 'c')
if not f[1] and not f[3] then return @@UNKNOWN@@ end
if f[1] ~= 'delayed' or rcall('ZREM', K.delayed, id) == 0 then return @@NOT_DELAYED@@ end
local now = now_ms()
rcall('HDEL', tk, 'due')
if make_runnable(id, tk, f[2], where == 'front' and 'front' or 'tail', now) then wake(1) end
publish({e = 'promoted', n = 1, ids = {id}})
return @@REQUEUED@@
