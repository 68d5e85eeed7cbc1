-- @include base
-- The heartbeat's clock: deadlines are judged only by time the queue's workers could beat in.
-- Every beat and every registration notes its time (meta 'hb'). One that finds the queue's last
-- beat more than `gap` ms old (HEARTBEAT_TTL minus HEARTBEAT_INTERVAL: a live worker beats more
-- often than that while it can), or none at all, knows that nobody could beat meanwhile (Redis
-- was down, or cut off from every worker), or cannot know it: no deadline of the queue, of a
-- worker or of a task, is judged before a full TTL from now (meta 'hg'), so that every worker
-- alive beats again first. Returns whether deadlines may be judged now.
local function note_beat(now, ttl, gap)
  local last = tonumber(rcall('HGET', K.meta, 'hb') or '')
  if not last or now - last > gap then rcall('HSET', K.meta, 'hg', now + ttl) end
  rcall('HSET', K.meta, 'hb', now)
  return now >= tonumber(rcall('HGET', K.meta, 'hg') or '0')
end
