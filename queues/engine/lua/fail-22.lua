-- A worker reports a failed attempt. With attempts left the task is delayed by exponential
-- backoff (backoff * 2^(attempt-1), capped, plus jitter); after the last it goes to the failed
-- set. The failure goes into the history, trimmed in this script. With retry_after set, the
-- attempt is given back and the task is delayed that long (a "too many requests" answer).
-- Keys: pending front delayed active deadlines failed failures stats throughput idle unique lockwaits lockheads durations outbox batchruns limits starts partitions ring pactive pwait
-- @include failure
-- @include holds
-- Input: ARGV[3] worker, ARGV[4] id, ARGV[5] lease, ARGV[6] error, ARGV[7] traceback,
--   ARGV[8] default retries, ARGV[9] default backoff s, ARGV[10] backoff max s,
--   ARGV[11] jitter fraction (chosen by the caller), ARGV[12] history size,
--   ARGV[13] retry_after s ('' for an ordinary failure), ARGV[14] keep ('k': the handler still
--   runs, e.g. past its timeout: its lock stays held until the worker releases it),
--   ARGV[15] optional: the run span's traceparent (tracing on: see links.run_traces; '' for
--   none), ARGV[16] optional: with retry_after, the hold of a RateLimited: 'q' (the queue) or
--   'p' (the task's partition) starts nothing for retry_after, and the task goes back first in
--   line (holds.lua), ARGV[17] optional: the handler's name (a Tasks framework function's
--   path: its own charts, stats.lua's record_handler_timings; '' for none)
-- Output: CANCELLED, RETRYING, FAILED (for good), DEFERRED, or STALE (stale lease)
-- Events: 'retrying' | 'failed' | 'cancelled' | 'deferred' {ids, error}
local worker, id, lease = ARGV[3], ARGV[4], ARGV[5]
local tk = task_key(id)
if ARGV[15] and ARGV[15] ~= '' then run_traces[id] = ARGV[15] end
local f = rcall('HMGET', tk, 'l', 's', 'lk', 'w', 'x', 'u', 'st', 'rd', 'c')
if f[1] ~= lease or f[2] ~= 'active' then return @@STALE@@ end
local now = now_ms()
local hold = ARGV[16] or ''
local mode = 'release'
if ARGV[14] == 'k' then mode = 'keep' elseif hold ~= '' then mode = 'requeue' end
leave_active(id, lease, f[3], f[4], mode, now)
local runs, waits = {}, {}
if f[7] then
  local run, ready = math.max(0, now - tonumber(f[7])) / 1000, tonumber(f[8] or f[9])
  runs, waits = {run}, ready and {math.max(0, tonumber(f[7]) - ready) / 1000} or {}
  record_durations(runs)
  record_timings(runs, waits, now)
end
-- a failed attempt counts as failed for its handler (as record_failure counts it for the queue)
local failing = (not f[5]) and ARGV[13] == '' and 1 or 0
record_handler_timings(ARGV[17], runs, waits, 0, failing, now)
if f[5] then
  drop_cancelled(id, tk, f[6], now, worker)
  publish({e = 'cancelled', ids = {id}})
  return @@CANCELLED@@
end
if hold ~= '' and ARGV[13] ~= '' then
  rcall('HINCRBY', tk, 'a', -1)
  hold_back(hold, rcall('HGET', tk, 'pk'), now + math.floor(tonumber(ARGV[13]) * 1000), now)
  requeue_front(id, tk, nil, f[6], f[3], now)
  publish({e = 'deferred', ids = {id}, error = string.sub(ARGV[6], 1, 200)})
  return @@DEFERRED@@
end
if ARGV[13] ~= '' then
  rcall('HINCRBY', tk, 'a', -1)
  rcall('HDEL', tk, 'w', 'st')
  delay_task(id, tk, now + math.floor(tonumber(ARGV[13]) * 1000), now)
  publish({e = 'deferred', ids = {id}, error = string.sub(ARGV[6], 1, 200)})
  return @@DEFERRED@@
end
return record_failure(id, tk, now, {
  error = ARGV[6], traceback = ARGV[7], worker = worker, retries = tonumber(ARGV[8]),
  backoff = tonumber(ARGV[9]), backoff_max = tonumber(ARGV[10]), jitter = tonumber(ARGV[11]),
  hist = tonumber(ARGV[12]),
})
