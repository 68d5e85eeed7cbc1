-- Tell blocked tasks of this queue that a parent ended (the second step after the parent's
-- end, run by workflows.drain). Idempotent: each (child, parent) is acted on once, so a step
-- repeated after a crash changes nothing. A child told before it exists (enqueue not done
-- yet) keeps the news in parents:<id> for its enqueue. When its last parent completed, a
-- child becomes runnable (or delayed until its due time); when a parent ended otherwise
-- (failed for good, cancelled, deleted) it is cancelled, unless it runs anyway ('run').
-- Keys: pending front delayed active deadlines stats idle unique lockwaits lockheads outbox blocked batchruns limits starts partitions ring pactive pwait
-- @include active
-- @include wake
-- Input: ARGV[3] n, then n triples: child id, parent id, the parent's outcome, then optionally
--   n traceparents: the parent's run span (tracing on, '' for none), appended to a released
--   child's trace context (tc) as a link line (tracing.py), at most ~70 of them
-- Output: one code per triple: 1 released, 2 cancelled, 3 still blocked, 0 nothing to do
-- Events: 'released' {ids}, 'cancelled' {ids, reason}
local n = tonumber(ARGV[3])
local now = now_ms()

-- Append the run traceparent `rt` to the child's stored trace context, as a link line.
local function link_run(tk, rt)
  if not rt or rt == '' then return end
  local tc = rcall('HGET', tk, 'tc') or ''
  if #tc > 4096 then return end
  if not string.find(tc, '\n', 1, true) then tc = tc .. '\n' end
  rcall('HSET', tk, 'tc', tc .. '\n' .. rt)
end

local out, released, runnable = {}, {}, 0
for i = 0, n - 1 do
  local id, pid, outcome = ARGV[4 + 3 * i], ARGV[5 + 3 * i], ARGV[6 + 3 * i]
  local tk, pk = task_key(id), parents_key(id)
  local rec = rcall('HGET', pk, pid)
  local f = rcall('HMGET', tk, 's', 'ob', 'lk', 'u', 'due', 'c')
  local code = 0
  if rec and rec ~= 'w' then
    code = 0  -- told already
  elseif not state_of(f[1], f[6]) then
    rcall('HSET', pk, pid, outcome)  -- not enqueued yet (or gone): its enqueue reads this
    rcall('PEXPIRE', pk, LINKS_KEEP_MS)
  elseif rec == 'w' and f[1] == 'blocked' then
    rcall('HSET', pk, pid, outcome)
    if outcome == 'completed' or f[2] == 'run' then
      link_run(tk, ARGV[3 + 3 * n + i + 1])
      if rcall('HINCRBY', tk, 'np', -1) <= 0 then
        rcall('HINCRBY', K.stats, 'blocked', -1)
        rcall('ZREM', K.blocked, id)
        local due = tonumber(f[5] or '0')
        if due > now then
          delay_task(id, tk, due, now)
        elseif make_runnable(id, tk, f[3], 'tail', now) then
          runnable = runnable + 1
        end
        released[#released + 1] = id
        code = 1
      else
        code = 3
      end
    else
      local why = 'parent ' .. pid .. ' ' .. outcome
      rcall('HINCRBY', K.stats, 'blocked', -1)
      rcall('ZREM', K.blocked, id)
      rcall('HINCRBY', K.stats, 'cancelled', 1)
      clear_unique(id, f[4])
      task_ended(id, tk, 'cancelled', now, nil, why)
      forget(id, tk)
      rcall('DEL', tk)
      publish({e = 'cancelled', ids = {id}, n = 1, reason = why})
      code = 2
    end
  end
  out[i + 1] = code
end
if #released > 0 then publish({e = 'released', ids = released, n = #released}) end
wake(runnable)
return out
