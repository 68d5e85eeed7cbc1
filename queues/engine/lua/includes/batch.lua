-- @include base
-- Batches: each in its own slot ('worqr:{batch:<id>}:'), so these scripts touch only it:
-- 'batch' (hash: d description, os/oc the callbacks, rt a run's traceparent, st state, total, completed, failed,
-- cancelled, c created, closed, fin, cb 'due'/'done'), 'live' (ids not ended), 'tasks' (every
-- id, in order), 'queues'. A task counts once: when it leaves 'live' (SREM is the guard).

local BATCH_EVENTS = '@@batch_events@@'

local function batch_publish(event)
  event.b = string.sub(QUEUE, 7)
  rcall('PUBLISH', BATCH_EVENTS, cjson.encode(event))
end

-- Finish the batch if it is closed and every task ended: its state and end time, and its
-- callbacks due. Returns 1 if it finished now, else 0.
local function finish_if_done(now)
  local f = rcall('HMGET', K.batch, 'closed', 'fin', 'failed', 'cancelled', 'os', 'oc')
  if not f[1] or f[2] or rcall('SCARD', K.live) > 0 then return 0 end
  local st = 'succeeded'
  if tonumber(f[3] or '0') + tonumber(f[4] or '0') > 0 then st = 'finished_with_failures' end
  rcall('HSET', K.batch, 'st', st, 'fin', now)
  if f[5] or f[6] then rcall('HSET', K.batch, 'cb', 'due') end
  batch_publish({e = 'finished', st = st})
  return 1
end
