-- Open a batch: its description and callbacks (each '' or JSON [queue, payload, kind]).
-- Keys: batch live
-- @include batch
-- Input: ARGV[3] description, ARGV[4] on_success, ARGV[5] on_complete
-- Output: created ms, or 0 if the batch existed already
-- Events: 'opened' (on the batch channel)
local now = now_ms()
if rcall('HSETNX', K.batch, 'c', now) == 0 then return 0 end
rcall('HSET', K.batch, 'd', ARGV[3], 'st', 'open', 'total', 0, 'completed', 0, 'failed', 0, 'cancelled', 0)
if ARGV[4] ~= '' then rcall('HSET', K.batch, 'os', ARGV[4]) end
if ARGV[5] ~= '' then rcall('HSET', K.batch, 'oc', ARGV[5]) end
batch_publish({e = 'opened'})
return now
