-- @include limits
-- Holds (a handler raised RateLimited(retry_after=s): the service it calls said "too many
-- requests"): the whole queue, or only the task's partition when its handler has partition=,
-- starts nothing until then, on any worker. The queue's hold is the field 'hu' of `limits`, a
-- partition's its entry in HOLDS; both are read where room is counted (limits.lua) and end by
-- themselves, or at set_limits(reset=True).

-- Hold the queue ('q') or partition pk ('p', when the task has one) until `untl` (ms; a later
-- hold already set stays), and wake the sleeping workers then.
local function hold_back(scope, pk, untl, now)
  if scope == 'p' and pk then
    local was = tonumber(rcall('HGET', HOLDS, pk) or '')
    if not was or was < untl then rcall('HSET', HOLDS, pk, untl) end
  else
    local was = tonumber(rcall('HGET', K.limits, 'hu') or '')
    if not was or was < untl then rcall('HSET', K.limits, 'hu', untl) end
    LIMITS = nil
  end
  wake_for_due(untl, now)
  publish({e = 'held', until_ms = untl, partition = scope == 'p' and pk or nil})
end
