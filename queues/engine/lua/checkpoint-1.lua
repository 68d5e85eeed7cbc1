-- Save a checkpoint of a running generator handler: the last value it yielded (JSON, checked
-- and bounded by the worker), with Redis's time. Fenced by the lease: only the task's current
-- holder, while the task is active, may save; a stale holder's checkpoint is refused, so a
-- worker presumed dead can't move a checkpoint back under the run that took its task over.
-- Keys: active
-- @include base
-- Input: ARGV[3] id, ARGV[4] lease, ARGV[5] the checkpoint (JSON text)
-- Output: OK or STALE
-- Events: none
local id, lease = ARGV[3], ARGV[4]
local tk = task_key(id)
if not rcall('ZSCORE', K.active, id) or rcall('HGET', tk, 'l') ~= lease then
  return @@STALE@@
end
rcall('HSET', tk, 'ck', ARGV[5], 'ckt', now_ms())
return @@OK@@
