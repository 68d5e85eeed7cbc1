-- The batch's callbacks were enqueued (each once, by its once key): nothing is due any more.
-- Keys: batch live
-- @include batch
-- Input: none
-- Output: 1 if they were due
if rcall('HGET', K.batch, 'cb') ~= 'due' then return 0 end
rcall('HSET', K.batch, 'cb', 'done')
return 1
