-- A worker reports tasks done. Each (id, lease) pair is checked against the task's current
-- lease: a stale one (the task was recovered and handed to someone else) is refused. A task
-- that was asked to cancel while running counts as cancelled, its outcome discarded.
-- Input: ARGV[3] worker, ARGV[4] n, ARGV[5] result TTL ms,
--        then n triples: id, lease, result ('' to keep none; else kept for the result TTL)
-- Output: one code per task: 1 completed, 2 cancelled, -1 stale lease or not active.
-- Events: 'completed' {w, ids, n}, 'cancelled' {ids}
return finish_tasks(ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), 6, now_ms())
