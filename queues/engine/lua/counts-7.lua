-- Read one queue's counts in one step, so they are consistent with each other (a read only).
-- Keys: pending front delayed active failed stats meta
-- @include base
-- Input: none
-- Output: {LLEN front, LLEN pending, ZCARD delayed, ZCARD active, ZCARD failed,
--   the stats hash as a flat field/value list, 1 if paused else 0, 1 if a worker ever served
--   the queue (registered for it: its timings are in meta) else 0}
return {
  rcall('LLEN', K.front), rcall('LLEN', K.pending), rcall('ZCARD', K.delayed),
  rcall('ZCARD', K.active), rcall('ZCARD', K.failed), rcall('HGETALL', K.stats),
  rcall('HEXISTS', K.meta, 'paused'), rcall('HEXISTS', K.meta, 'lt'),
}
