-- Add one task, runnable now, with no options: `Queue.enqueue`'s common call, as `enqueue`
-- does it for n = 1 when no worker of the queue is idle and the queue has no limits, in a short
-- script (two fifths of enqueue's work inside Redis, and a fifth of its arguments).
-- Keys: pending stats meta idle limits
-- @include resend
-- Input: ARGV[3] id, ARGV[4] payload, ARGV[5] 'b' if the payload was bytes, ARGV[6] the trace
--   context (as enqueue's) -- each '' when not given --, ARGV[7] '1' if the call may make the
--   queue (as enqueue's ARGV[19]), ARGV[8] the window (ms) within which the call may be sent
--   again (as enqueue's ARGV[20]).
-- Output: false when a worker of the queue is idle (enqueue hands it the task in its wake-up)
--   or the queue has limits (enqueue counts them): nothing was written, call enqueue instead.
--   Otherwise as enqueue's: {queue_was_new (0/1), now (ms), id}, or {NO_QUEUE, now} (nothing
--   written); an id that already exists or ended lately is left as it is.
-- Events: 'enqueued' {n, ids, delayed}, as enqueue's.
-- (an idle set or a limits hash exists only while not empty)
if rcall('EXISTS', K.idle, K.limits) > 0 then return false end
local now = now_ms()
local now_s = tostring(now)  -- once: each number handed to Redis costs it a printf
if ARGV[7] ~= '1' and rcall('HEXISTS', K.meta, 'created') == 0 then return {@@NO_QUEUE@@, now} end
local is_new = rcall('HSETNX', K.meta, 'created', now_s)
note_resend(tonumber(ARGV[8]), now)
local id = ARGV[3]
local tk = task_key(id)
if rcall('EXISTS', tk) == 1 or ended_lately(id) then return {is_new, now, id} end
local fields = {'c', now_s}  -- no 's': pending (state_of)
add_payload(fields, ARGV[4])
if ARGV[5] ~= '' then fields[#fields + 1] = 'y'; fields[#fields + 1] = ARGV[5] end
if ARGV[6] ~= '' then fields[#fields + 1] = 'tc'; fields[#fields + 1] = ARGV[6] end
rcall('HSET', tk, unpack(fields))
rcall('HINCRBY', K.stats, 'enqueued', 1)
-- publish()'s message for {e = 'enqueued', n = 1, ids = {id}, delayed = false}, written out:
-- cjson costs a tenth of this script. Queue names and ids need no JSON escaping (keys.py).
rcall('PUBLISH', EVENTS, '{"e":"enqueued","n":1,"ids":["' .. id .. '"],"delayed":false,"q":"' .. QUEUE .. '"}')
rcall('RPUSH', K.pending, id)
return {is_new, now, id}
