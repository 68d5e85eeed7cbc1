-- A worker gives tasks back unfinished (shutdown, a hand-over it can't take, a task it holds
-- but never received): each goes back first in line, the attempt not counted, in the order
-- given (the first ends up frontmost), and idle workers are woken. A task asked to cancel is
-- dropped instead. Stale leases are refused.
-- Keys: pending front delayed active deadlines stats idle unique lockwaits lockheads outbox batchruns limits starts partitions ring pactive pwait
-- @include active
-- Input: ARGV[3] worker, ARGV[4] n, then n triples: id, lease, keep ('k': the handler still
--   runs; its lock stays held until the worker releases it; 'u': its handler never started, so
--   its start is not counted under the rates either)
-- Output: one code per task: REQUEUED, CANCELLED, or STALE (stale lease or not active).
-- Events: 'stopped' {w, ids}
local worker, n = ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local out, requeued = {}, {}
for i = n - 1, 0, -1 do  -- in reverse: each goes to the front, so the first given ends up first
  local id, lease, keep = ARGV[5 + 3 * i], ARGV[6 + 3 * i], ARGV[7 + 3 * i]
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 'l', 's', 'lk', 'w', 'x', 'u')
  if f[1] ~= lease or f[2] ~= 'active' then
    out[i + 1] = @@STALE@@
  else
    local mode = 'requeue'
    if keep == 'k' then mode = 'keep' elseif f[5] then mode = 'release' end
    leave_active(id, lease, f[3], f[4], mode, now)
    rcall('HINCRBY', tk, 'a', -1)
    if keep == 'u' then uncount_start(rcall('HGET', tk, 'pk'), lease) end
    if requeue_front(id, tk, f[5], f[6], f[3], now) == 1 then
      requeued[#requeued + 1] = id
      out[i + 1] = @@REQUEUED@@
    else
      out[i + 1] = @@CANCELLED@@
    end
  end
end
if #requeued > 0 then
  publish({e = 'stopped', w = worker, ids = requeued, n = #requeued})
  wake(#requeued)
end
return out
