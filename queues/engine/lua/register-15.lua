-- A worker starts serving the queue: it is recorded with a heartbeat deadline.
-- Input: ARGV[3] worker, ARGV[4] heartbeat TTL ms
-- Output: 1
-- Events: 'worker_joined' {w}
local worker, ttl = ARGV[3], tonumber(ARGV[4])
rcall('ZADD', K.workers, now_ms() + ttl, worker)
publish({e = 'worker_joined', w = worker})
return 1
