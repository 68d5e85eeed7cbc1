-- @include active
-- @include stats
-- Finishing tasks, shared by finish and start (which acknowledges and fetches in one call).

-- A plain task (no lock, partition, batch or cancel; nothing kept running; no queue
-- concurrency, which counts the active set) leaves the active state and ends with writes that
-- are the same for every such task of the call: they are gathered in `plain` and made with a
-- few commands per call (flush_plain), not a dozen per task. Nothing else the call does reads
-- them in between.
local function flush_plain(plain, now)
  local ids = plain.ids
  if #ids == 0 then return end
  for s = 1, #ids, 1000 do
    local last = math.min(s + 999, #ids)
    rcall('ZREM', K.active, unpack(ids, s, last))
    rcall('ZREM', K.deadlines, unpack(ids, s, last))
  end
  for w, held in pairs(plain.held) do
    for s = 1, #held, 1000 do rcall('SREM', worker_tasks_key(w), unpack(held, s, math.min(s + 999, #held))) end
  end
  record_ends(ids, 'completed', now)
  keep_histories(plain.history, 'completed', now)
  for s = 1, #plain.gone, 1000 do rcall('DEL', unpack(plain.gone, s, math.min(s + 999, #plain.gone))) end
end

-- Keep a completed task's result (its hash stays for result_ttl ms, listed in `results`).
local function keep_result(id, tk, result, result_ttl, now)
  rcall('HSET', tk, 's', 'completed', 'res', result, 'fin', now)
  rcall('PEXPIRE', tk, result_ttl)
  rcall('ZADD', K.results, now + result_ttl, id)
end

-- Complete plain task id (t: its fields, taken over for its record) held by t.w.
local function complete_plain(id, tk, t, result, result_ttl, now, worker, plain)
  local ids = plain.ids
  ids[#ids + 1] = id
  if t.w then
    local held = plain.held[t.w]
    if not held then
      held = {}
      plain.held[t.w] = held
    end
    held[#held + 1] = id
  end
  clear_unique(id, t.u)
  local np, tg = t.np, t.tg
  local entry = history_record(id, t, 'completed', now, worker)
  if entry then
    local hs = plain.history
    hs[#hs + 1], hs[#hs + 2] = id, entry
  end
  tell_ended(id, 'completed', nil, np, now, worker)
  forget_tags(id, tg)
  local gone = plain.gone
  gone[#gone + 1] = log_key(id)
  if result ~= '' then
    keep_result(id, tk, result, result_ttl, now)
    return true
  end
  gone[#gone + 1] = tk
  return false
end

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
  local plain = {ids = {}, held = {}, history = {}, gone = {}}
  local seen = {}  -- an id reported twice in one call: the second is stale
  local counted = limits().c
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
    local raw = seen[id] and {} or rcall('HGETALL', tk)
    seen[id] = true
    local t = {}
    for k = 1, #raw, 2 do t[raw[k]] = raw[k + 1] end
    if t.l ~= lease or t.s ~= 'active' then
      out[#out + 1] = @@STALE@@
    else
      local simple = not (t.lk or t.pk or t.bt or t.x or counted or keep == 'k')
      if not simple then leave_active(id, lease, t.lk, t.w, keep == 'k' and 'keep' or 'release', now) end
      if t.st then
        runs[#runs + 1] = math.max(0, now - tonumber(t.st)) / 1000
        local ready = tonumber(t.rd or t.c)
        if ready then waits[#waits + 1] = math.max(0, tonumber(t.st) - ready) / 1000 end
        if h then
          h[1][#h[1] + 1] = runs[#runs]
          if ready then h[2][#h[2] + 1] = waits[#waits] end
        end
      end
      if t.x then
        drop_cancelled(id, tk, t.u, now, worker)
        cancelled[#cancelled + 1] = id
        out[#out + 1] = @@CANCELLED@@
      else
        if simple then
          if complete_plain(id, tk, t, result, result_ttl, now, worker, plain) then kept = true end
        else
          clear_unique(id, t.u)
          task_ended(id, tk, 'completed', now, worker)
          forget(id, tk)
          if result ~= '' then
            keep_result(id, tk, result, result_ttl, now)
            kept = true
          else
            rcall('DEL', tk)
          end
        end
        done[#done + 1] = id
        if h then h[3] = h[3] + 1 end
        out[#out + 1] = @@COMPLETED@@
      end
    end
  end
  flush_plain(plain, now)
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
