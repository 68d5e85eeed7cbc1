-- Forget an idle queue (the workers' sweep, engine/sweep.py): if it holds nothing (no task in any
-- state, none waiting for a lock, kept as a result or to be told to a child), no worker serves
-- it, it is not paused and has no limits and no schedule, and nothing was enqueued since the
-- sweep found it empty (its 'enqueued' counter is still ARGV[3]), delete its keys (as drop does
-- at its end) and its depth samples. The caller took it off the known queues first, and puts it
-- back if this keeps it.
-- Keys: pending front delayed active deadlines failed failures stats throughput meta workers idle unique lockwaits lockheads results durations outbox blocked batchruns once limits starts partitions ring pactive pwait schedules depth
-- @include erase
-- Input: ARGV[3] the queue's 'enqueued' counter when the sweep found it empty
-- Output: 1 forgotten, 0 kept
-- Events: 'forgotten'
if rcall('EXISTS', K.delayed, K.active, K.failed, K.lockwaits, K.results, K.blocked, K.partitions, K.outbox,
    K.workers, K.limits, K.schedules, K.batchruns) > 0 then
  return 0
end
local stats = rcall('HMGET', K.stats, 'enqueued', 'gone')
-- Entries of front and pending whose task was removed are counted in 'gone' (skipped when reached).
if (stats[1] or '0') ~= ARGV[3] or rcall('LLEN', K.front) + rcall('LLEN', K.pending) > tonumber(stats[2] or '0') then
  return 0
end
if rcall('HEXISTS', K.meta, 'paused') == 1 then return 0 end
rcall('UNLINK', K.depth)
erase_queue('forgotten')
return 1
