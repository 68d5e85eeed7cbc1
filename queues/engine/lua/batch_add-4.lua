-- Reserve tasks in an open batch, before they are enqueued in their queue (so no task can end
-- uncounted): their ids join 'live' and 'tasks', the total grows.
-- Keys: batch live tasks queues
-- @include batch
-- Input: ARGV[3] queue, ARGV[4] n, then n task ids
-- Output: OK, UNKNOWN (no such batch) or FINISHED (closed: no more tasks)
-- Events: 'added' {n}
if rcall('EXISTS', K.batch) == 0 then return @@UNKNOWN@@ end
if rcall('HEXISTS', K.batch, 'closed') == 1 then return @@FINISHED@@ end
local n = tonumber(ARGV[4])
local added = 0
for i = 5, 4 + n, 1000 do
  local last = math.min(i + 999, 4 + n)
  added = added + rcall('SADD', K.live, unpack(ARGV, i, last))
  rcall('RPUSH', K.tasks, unpack(ARGV, i, last))
end
rcall('SADD', K.queues, ARGV[3])
rcall('HINCRBY', K.batch, 'total', added)
batch_publish({e = 'added', n = added})
return @@OK@@
