-- @include base
-- Leases (fencing tokens): every delivery of a task, and every fencing-out of a holder, takes a
-- number never used before in the queue. The counter survives drop, so a report from an earlier
-- delivery, even of an earlier task with the same id, can never pass for the current one.
local function new_lease()
  return rcall('INCR', K.leases)
end
