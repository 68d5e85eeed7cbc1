-- A worker gives tasks back unfinished (shutdown, or it stops serving the queue): each goes
-- back to the front of the queue, the attempt not counted, and idle workers are woken. A
-- task asked to cancel is dropped instead. Stale leases are refused.
-- Input: ARGV[3] worker, ARGV[4] n, then n pairs: id, lease
-- Output: one code per task: 1 requeued, 2 cancelled, -1 stale lease or not active.
-- Events: 'stopped' {w, ids}
local worker, n = ARGV[3], tonumber(ARGV[4])
local out, requeued = {}, {}
-- Requeue in reverse so the first pair ends up frontmost.
for i = n - 1, 0, -1 do
  local id, lease = ARGV[5 + 2 * i], ARGV[6 + 2 * i]
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 'l', 's', 'lk', 'w', 'x', 'u')
  if f[1] ~= lease or f[2] ~= 'active' then
    out[i + 1] = -1
  else
    leave_active(id, lease, f[3], f[4], not f[5])
    rcall('HINCRBY', tk, 'a', -1)
    if requeue_front(id, tk, f[5], f[6]) == 1 then
      requeued[#requeued + 1] = id
      out[i + 1] = 1
    else
      out[i + 1] = 2
    end
  end
end
if #requeued > 0 then
  publish({e = 'stopped', w = worker, ids = requeued, n = #requeued})
  wake(#requeued)
end
return out
