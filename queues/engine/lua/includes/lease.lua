-- @include base
-- Leases (fencing tokens): every delivery of a task, and every fencing-out of a holder, takes a
-- number never used before in the queue. The counter survives drop, so a report from an earlier
-- delivery, even of an earlier task with the same id, can never pass for the current one.
-- A call that starts many tasks reserves their numbers with one INCRBY (reserve_leases) and
-- gives back the ones it did not use (settle_leases), so the counter moves exactly as if each
-- had been taken with its own INCR.
local lease_next, lease_last = 1, 0

local function new_lease()
  if lease_next <= lease_last then
    lease_next = lease_next + 1
    return lease_next - 1
  end
  return rcall('INCR', K.leases)
end

-- Make sure the next n new_lease() calls need no command.
local function reserve_leases(n)
  local have = lease_last - lease_next + 1
  if n <= have then return end
  local last = rcall('INCRBY', K.leases, n - have)
  if have <= 0 then lease_next = last - (n - have) + 1 end
  lease_last = last
end

-- Give back the reserved numbers not taken: the counter is left at the last one taken.
local function settle_leases()
  if lease_next <= lease_last then
    rcall('DECRBY', K.leases, lease_last - lease_next + 1)
    lease_last = lease_next - 1
  end
end
