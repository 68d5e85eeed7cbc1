-- A worker acknowledges tasks it finished and takes up to `count` of the oldest runnable tasks,
-- in one call (so a busy worker needs one round trip per batch). Due delayed tasks are promoted
-- first. A task whose lock is held is set aside on that lock's wait list (never bounced).
-- Each task taken gets a new lease (fencing token), its lock, and is recorded as held by
-- this worker. A worker that takes fewer than asked joins the idle set, in the same step, so
-- a wake-up can't slip between "found nothing" and "waiting".
-- Input: ARGV[3] worker, ARGV[4] count (0: only acknowledge), ARGV[5] lock TTL ms,
--        ARGV[6] timeout grace ms, ARGV[7] default timeout s (0: none), and optionally
--        ARGV[8] n finished, ARGV[9] result TTL ms, then n triples as for finish: id, lease, result
-- Output: {status, ms until the next delayed task is due (-1: none), then 9 fields per task
--          taken: id, payload, lease, attempt, timeout, callback, meta, retries, payload kind
--          ('b': bytes), then the n finish codes (as finish returns them)}; status 1 ok,
--          0 paused, -1 the worker is not registered (nothing taken).
-- Events: those of finish, 'promoted' {n}, 'started' {w, ids}, 'waiting' {ids}
local worker, count = ARGV[3], tonumber(ARGV[4])
local lock_ttl, grace, default_timeout = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
local acked = tonumber(ARGV[8] or '0')
local codes = {}
if acked > 0 then codes = finish_tasks(worker, acked, tonumber(ARGV[9]), 10, now) end
local function reply(out)
  for _, code in ipairs(codes) do out[#out + 1] = code end
  return out
end
if count == 0 then return reply({1, -1}) end
if not rcall('ZSCORE', K.workers, worker) then return reply({-1, -1}) end

local due = rcall('ZRANGEBYSCORE', K.delayed, '-inf', now, 'LIMIT', 0, 1000)
for _, id in ipairs(due) do
  rcall('ZREM', K.delayed, id)
  rcall('HSET', task_key(id), 's', 'pending')
  rcall('RPUSH', K.pending, id)
end
if #due > 0 then publish({e = 'promoted', n = #due, ids = due}) end

if rcall('HEXISTS', K.meta, 'paused') == 1 then
  rcall('SADD', K.idle, worker)
  local nd = next_due()
  if nd >= 0 then nd = math.max(0, nd - now) end
  return reply({0, nd})
end

local out = {1, -1}
local taken = take_tasks(worker, count, out, now, {
  lock_ttl = lock_ttl, grace = grace, default_timeout = default_timeout,
})
if #taken < count then rcall('SADD', K.idle, worker) else rcall('SREM', K.idle, worker) end
local nd = next_due()
if nd >= 0 then nd = math.max(0, nd - now) end
out[2] = nd
return reply(out)
