-- @include active
-- @include stats
-- Finishing tasks, shared by finish and start (which acknowledges and fetches in one call).

-- Finish n tasks whose (id, lease, result, keep) quadruples start at ARGV[base]. Each lease is
-- checked against the task's current one: a stale one (the task was recovered and handed to
-- someone else) is refused. A task asked to cancel while running counts as cancelled, its
-- outcome discarded. A non-empty result is kept for result_ttl ms. keep = 'k': the handler
-- still runs (a cancel reported at once), so its lock stays held until the worker releases it.
-- The quadruples may be followed by n run traceparents (tracing on: see links.run_traces; ''
-- for none), and those by n handler names (a Tasks framework function's path, '' for none: its
-- own charts, stats.lua's record_handler_timings).
-- Returns one code per task: COMPLETED, CANCELLED, or STALE (stale lease or not active).
local function finish_tasks(worker, n, result_ttl, base, now)
  local out, done, cancelled, runs, waits = {}, {}, {}, {}, {}
  local handlers, named = {}, {}  -- name -> {runs, waits, completed}; the names in order
  local kept = false
  for i = 0, n - 1 do
    local j = base + 4 * i
    local id, lease, result, keep = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
    local rt = ARGV[base + 4 * n + i]
    if rt and rt ~= '' then run_traces[id] = rt end
    local hn = ARGV[base + 5 * n + i]
    local h = nil
    if hn and hn ~= '' then
      h = handlers[hn]
      if not h then
        h = {{}, {}, 0}
        handlers[hn] = h
        named[#named + 1] = hn
      end
    end
    local tk = task_key(id)
    local f = rcall('HMGET', tk, 'l', 's', 'lk', 'w', 'x', 'u', 'st', 'rd', 'c')
    if f[1] ~= lease or f[2] ~= 'active' then
      out[#out + 1] = @@STALE@@
    else
      leave_active(id, lease, f[3], f[4], keep == 'k' and 'keep' or 'release', now)
      if f[7] then
        runs[#runs + 1] = math.max(0, now - tonumber(f[7])) / 1000
        local ready = tonumber(f[8] or f[9])
        if ready then waits[#waits + 1] = math.max(0, tonumber(f[7]) - ready) / 1000 end
        if h then
          h[1][#h[1] + 1] = runs[#runs]
          if ready then h[2][#h[2] + 1] = waits[#waits] end
        end
      end
      if f[5] then
        drop_cancelled(id, tk, f[6], now, worker)
        cancelled[#cancelled + 1] = id
        out[#out + 1] = @@CANCELLED@@
      else
        clear_unique(id, f[6])
        task_ended(id, tk, 'completed', now, worker)
        forget(id, tk)
        if result ~= '' then
          rcall('HSET', tk, 's', 'completed', 'res', result, 'fin', now)
          rcall('PEXPIRE', tk, result_ttl)
          rcall('ZADD', K.results, now + result_ttl, id)
          kept = true
        else
          rcall('DEL', tk)
        end
        done[#done + 1] = id
        if h then h[3] = h[3] + 1 end
        out[#out + 1] = @@COMPLETED@@
      end
    end
  end
  record_durations(runs)
  record_timings(runs, waits, now)
  for _, hn in ipairs(named) do
    local h = handlers[hn]
    record_handler_timings(hn, h[1], h[2], h[3], 0, now)
  end
  if #done > 0 then
    rcall('HINCRBY', K.stats, 'completed', #done)
    count_minute('c', now, #done)
    publish({e = 'completed', w = worker, ids = done, n = #done})
    if kept then rcall('ZREMRANGEBYSCORE', K.results, '-inf', now) end
  end
  if #cancelled > 0 then publish({e = 'cancelled', ids = cancelled, n = #cancelled}) end
  return out
end
