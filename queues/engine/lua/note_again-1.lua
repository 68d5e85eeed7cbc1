-- Note that tasks were enqueued as runs again of ended (or failed) ones: shown on their pages
-- as long as they live and their record is kept (pruned with it: prune_history).
-- Keys: again
-- @include base
-- Input: ARGV[3] n, then n pairs: the new task's id, the id of the task it runs again
-- Output: n
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  rcall('HSET', K.again, ARGV[4 + 2 * i], ARGV[5 + 2 * i])
end
return n
