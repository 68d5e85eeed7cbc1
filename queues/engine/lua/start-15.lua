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
local taken, waiting = {}, {}
local wk = worker_tasks_key(worker)
while #taken < count do
  local id = rcall('LPOP', K.pending)
  if not id then break end
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 'p', 'lk', 't', 'cb', 'm', 'r', 'y')
  if f[1] then
    local lk = f[2]
    if lk and rcall('EXISTS', lock_key(lk)) == 1 then
      rcall('RPUSH', lock_wait_key(lk), id)
      rcall('HSET', tk, 's', 'waiting')
      rcall('ZADD', K.lockwaits, 'NX', now + lock_ttl, lk)
      waiting[#waiting + 1] = id
    else
      local lease = rcall('HINCRBY', tk, 'l', 1)
      local attempt = rcall('HINCRBY', tk, 'a', 1)
      if lk then rcall('SET', lock_key(lk), id .. ':' .. lease, 'PX', lock_ttl) end
      rcall('HSET', tk, 's', 'active', 'w', worker, 'st', now)
      -- the fraction keeps the start order of one batch (a requeue restores it)
      rcall('ZADD', K.active, now + math.min(#taken, 999) / 1000, id)
      rcall('SADD', wk, id)
      local timeout = tonumber(f[3] or default_timeout)
      if timeout > 0 then rcall('ZADD', K.deadlines, now + timeout * 1000 + grace, id) end
      taken[#taken + 1] = id
      local i = #out
      out[i + 1], out[i + 2], out[i + 3], out[i + 4] = id, f[1], lease, attempt
      out[i + 5], out[i + 6], out[i + 7], out[i + 8] = tostring(timeout), f[4] or '', f[5] or '', f[6] or ''
      out[i + 9] = f[7] or ''
    end
  end
end
if #waiting > 0 then
  rcall('HINCRBY', K.stats, 'waiting', #waiting)
  publish({e = 'waiting', ids = waiting, n = #waiting})
end
if #taken < count then rcall('SADD', K.idle, worker) else rcall('SREM', K.idle, worker) end
if #taken > 0 then publish({e = 'started', w = worker, ids = taken, n = #taken}) end
local nd = next_due()
if nd >= 0 then nd = math.max(0, nd - now) end
out[2] = nd
return reply(out)
