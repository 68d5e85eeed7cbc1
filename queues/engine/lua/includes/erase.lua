-- @include limits
-- @include resend
-- @include history
-- Delete every key of the queue, and tell the dashboards that it went (event `event`). Kept:
-- its lease counter (a lease is never used twice in a queue) and the ids it remembers (a task
-- is never run twice because it was pushed twice): see keys.py. Its record of ended tasks (both)
-- and of its producers' resend windows goes (an enqueue retried across it may add its task again).
local function erase_queue(event)
  rcall('UNLINK', K.pending, K.front, K.delayed, K.active, K.deadlines, K.failed, K.failures, K.stats,
    K.throughput, K.meta, K.workers, K.idle, K.unique, K.lockwaits, K.lockheads, K.results, K.durations,
    K.limits, K.starts, K.ring, K.pactive, K.pwait, K.blocked, K.outbox, K.batchruns, K.once, ENDED, RESEND, KEPT,
    PREFIX .. '@@expired@@', PREFIX .. '@@timings@@', HOLDS,
    HISTORY, HISTORY_INDEX.completed, HISTORY_INDEX.cancelled, HISTORY_INDEX.failed, AGAIN)
  publish({e = event})
end
