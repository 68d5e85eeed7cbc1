-- A checkpointed (generator) handler begins a run: count the run and read the task's last
-- checkpoint, so the handler resumes from it. Only the task's current holder (its lease, the
-- task active) may begin; a stale holder gets STALE and must not run it.
-- Keys: active
-- @include base
-- Input: ARGV[3] id, ARGV[4] lease
-- Output: {OK, checkpoint (JSON text, or false on a first run), runs (this one included)} or {STALE}
-- Events: none
local id, lease = ARGV[3], ARGV[4]
local tk = task_key(id)
if not rcall('ZSCORE', K.active, id) or rcall('HGET', tk, 'l') ~= lease then
  return {@@STALE@@}
end
local runs = rcall('HINCRBY', tk, 'ckn', 1)
return {@@OK@@, rcall('HGET', tk, 'ck'), runs}
