-- @include active
-- @include stats
-- A failed attempt of a task that already left the active state.

-- Retried after the backoff while attempts remain, else moved to the failed set. Either way
-- the failure goes into the history, trimmed to opts.hist entries. Returns RETRYING or FAILED
-- (for good). opts: error, traceback, worker, retries, backoff, backoff_max, jitter, hist.
local function record_failure(id, tk, now, opts)
  local f = rcall('HMGET', tk, 'a', 'r', 'b', 'u', @@payload_fields@@, 'y')
  local attempts = tonumber(f[1] or '0')
  local retries = tonumber(f[2] or opts.retries)
  local backoff = tonumber(f[3] or opts.backoff)
  local entry = {
    id = id, payload = string.sub(joined_payload(f, 5, tk) or '', 1, 4096), error = opts.error,
    traceback = opts.traceback, attempts = attempts, worker = opts.worker or '', failed_at = now,
  }
  if f[8] == 'e' then entry.payload = 'encrypted' end  -- an encrypted queue's: never copied out
  rcall('LPUSH', K.failures, cjson.encode(entry))
  rcall('LTRIM', K.failures, 0, opts.hist - 1)
  rcall('HSET', tk, 'e', opts.error, 'tb', opts.traceback)
  if opts.worker then rcall('HSET', tk, 'w', opts.worker) end
  rcall('HINCRBY', K.stats, 'failures', 1)
  count_minute('f', now, 1)
  if attempts <= retries then
    -- 2^1024 is infinite, and 0 times that NaN (a due time ZADD refuses, the script stopped
    -- midway): the exponent stops at 1000, numbers.MAX_RETRIES (for a task stored with more)
    local wait = backoff * math.pow(2, math.min(math.max(attempts - 1, 0), 1000))
    if wait > opts.backoff_max then wait = opts.backoff_max end
    wait = wait * (1 + opts.jitter)
    delay_task(id, tk, now + math.floor(wait * 1000), now)
    rcall('HINCRBY', K.stats, 'retried', 1)
    publish({e = 'retrying', ids = {id}, error = string.sub(opts.error, 1, 200)})
    return @@RETRYING@@
  end
  rcall('ZADD', K.failed, now, id)
  rcall('HSET', tk, 's', 'failed', 'fa', now)
  clear_unique(id, f[4])
  task_ended(id, tk, 'failed', now, opts.worker)
  rcall('HINCRBY', K.stats, 'failed', 1)
  publish({e = 'failed', ids = {id}, error = string.sub(opts.error, 1, 200)})
  return @@FAILED@@
end
