-- A worker acknowledges tasks it finished and takes up to `count` of the oldest runnable tasks,
-- in one call (so a busy worker needs one round trip per batch). Due delayed tasks are made
-- runnable first. Each task taken gets a new lease (fencing token), its lock, and is recorded as
-- held by this worker. A worker that takes fewer than asked joins the idle set in the same step,
-- so a wake-up can't slip between "found nothing" and "waiting".
-- Keys: pending front delayed active deadlines stats throughput meta workers idle unique lockwaits lockheads results durations leases outbox batchruns limits starts partitions ring pactive pwait
-- @include take
-- @include finish
-- Input: ARGV[3] worker, ARGV[4] count (0: only acknowledge), ARGV[5] lock TTL ms,
--   ARGV[6] timeout grace ms, ARGV[7] default timeout s (0: none), ARGV[8] result TTL ms,
--   ARGV[9] n finished, then n quadruples as for finish: id, lease, result, keep, then
--   (optionally, tracing on) n run span traceparents, then (optionally) n handler names.
-- Output: {status, ms until the next delayed task is due or a rate window holding tasks back
--   opens (-1: none), the start grace of the queue's rates (ms; 0: no rate: the tasks' handlers
--   must start within it of this call, or be given back unstarted), then 11 fields per task
--   taken: id, payload, lease, attempt, timeout, callback, meta, retries, payload kind ('b':
--   bytes), trace context ('' for none), then the n finish codes (as finish returns them)}.
--   Status: OK, PAUSED, NOT_REGISTERED (the worker was presumed dead: nothing taken), LATE (its
--   deadline has passed: nothing taken until it beats, for it may be failed by the next beat of
--   another worker and its tasks run again elsewhere), or MORE (entries left to look at: call
--   again).
-- Events: those of finish, 'promoted' {n}, 'started' {w, ids}
local worker, count = ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local acked = tonumber(ARGV[9])
local codes = {}
if acked > 0 then codes = finish_tasks(worker, acked, tonumber(ARGV[8]), 10, now) end
local function reply(out)
  for _, code in ipairs(codes) do out[#out + 1] = code end
  return out
end
if count == 0 then return reply({@@OK@@, -1, 0}) end
local deadline = rcall('ZSCORE', K.workers, worker)
if not deadline then return reply({@@NOT_REGISTERED@@, -1, 0}) end
if tonumber(deadline) < now then return reply({@@LATE@@, -1, 0}) end
promote_due(now)
local function due_in()
  local nd = next_due()
  local nw = next_window()
  if nw >= 0 and (nd < 0 or nw < nd) then nd = nw end
  if nd >= 0 then nd = math.max(0, nd - now) end
  return nd
end
if rcall('HEXISTS', K.meta, 'paused') == 1 then
  rcall('SADD', K.idle, worker)
  return reply({@@PAUSED@@, due_in(), 0})
end
local out = {@@OK@@, -1, limits().grace or 0}
local taken, more = take_tasks(worker, count, out, now, {
  lock_ttl = tonumber(ARGV[5]), grace = tonumber(ARGV[6]), default_timeout = tonumber(ARGV[7]),
})
if more then
  out[1] = @@MORE@@
elseif #taken < count then
  rcall('SADD', K.idle, worker)
else
  rcall('SREM', K.idle, worker)
end
out[2] = due_in()
return reply(out)
