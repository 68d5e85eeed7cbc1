-- A worker starts serving the queue: it is recorded with a heartbeat deadline.
-- Input: ARGV[3] worker, ARGV[4] heartbeat TTL ms, and the worker's timings for tasks handed to
--        it by enqueue: ARGV[5] lock TTL ms, ARGV[6] timeout grace ms, ARGV[7] default timeout s
-- Output: 1
-- Events: 'worker_joined' {w}
local worker, ttl = ARGV[3], tonumber(ARGV[4])
rcall('ZADD', K.workers, now_ms() + ttl, worker)
if ARGV[5] then rcall('HSET', K.meta, 'lt', ARGV[5], 'gr', ARGV[6], 'dt', ARGV[7]) end
publish({e = 'worker_joined', w = worker})
return 1
