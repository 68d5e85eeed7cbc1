-- @include base
-- @include bounds
-- Counters kept per minute, and the histogram of run durations.

-- Count finished ('c') or failed ('f') attempts in this minute's bucket, and in this hour's
-- ('C', 'F'); minute buckets older than 24 h and hour buckets older than 7 days are dropped as
-- new ones begin (and swept if a gap left some behind), so the hash stays bounded.
local function count_minute(kind, now, n)
  local m = math.floor(now / 60000)
  local h = math.floor(now / 3600000)
  local hk = string.upper(kind)
  if rcall('HINCRBY', K.throughput, hk .. h, n) == n then
    rcall('HDEL', K.throughput, hk .. (h - 168))
  end
  if rcall('HINCRBY', K.throughput, kind .. m, n) == n then
    rcall('HDEL', K.throughput, kind .. (m - 1440))
    if rcall('HLEN', K.throughput) > 2 * 1440 + 2 * 168 + 16 then
      for _, f in ipairs(rcall('HKEYS', K.throughput)) do
        local k, t = string.sub(f, 1, 1), tonumber(string.sub(f, 2))
        if (k == 'c' or k == 'f') and t <= m - 1440 then rcall('HDEL', K.throughput, f)
        elseif (k == 'C' or k == 'F') and t <= h - 168 then rcall('HDEL', K.throughput, f) end
      end
    end
  end
end

-- Add the runs (a list of durations in seconds) to the queue's histogram (bounds.lua) in a few
-- commands.
local function record_durations(runs)
  if #runs == 0 then return end
  local per, total = {}, 0
  for _, d in ipairs(runs) do
    local i = duration_bin(d)
    per[i] = (per[i] or 0) + 1
    total = total + d
  end
  for i, n in pairs(per) do rcall('HINCRBY', K.durations, bin_field(i), n) end
  rcall('HINCRBY', K.durations, 'count', #runs)
  rcall('HINCRBYFLOAT', K.durations, 'sum', total)
end

-- The charts' run and wait times over time (durations.py: `timings`): one histogram per bucket
-- under the bounds above, fields '<tag><bucket>:<r|w><bin>', at three levels (tag, minutes per
-- bucket, buckets kept). A call adds its runs to the current minute only (one HINCRBY per bin
-- it touches); the first write of a new minute rolls the minute noted in '@m' up into its
-- quarter hour and its hour (once a minute) and drops the buckets that left each level's span
-- (after a long gap, at most `kept` HDELs per level). So every minute but '@m' is in the coarser
-- levels, and a reader adds '@m' to them. Built from the prefix, as `ended` is.
-- Per handler (a Tasks framework function, named by the worker), the same fields under the
-- handler's slot '<k>.' (and its own '<k>.@m'), with two counters per bucket, ':c' completed
-- and ':f' failed attempts; '@n:<name>' -> k and '@k<k>' -> name, '@nc' the slots given: at
-- most HANDLERS_MAX, the handlers after those counted together in slot 0 ("other").
local TIMINGS = PREFIX .. '@@timings@@'
local TIMING_LEVELS = {@@timing_levels@@}
local HANDLERS_MAX = @@handlers_max@@

-- The counters of bucket x of a level (tag) under `prefix` ('' for the queue's, '<k>.' for a
-- handler's): every bin of both kinds, and a handler's two counts.
local function timing_fields(prefix, tag, x)
  local names = {}
  local at = prefix .. tag .. x
  for i = 1, #DURATION_BOUNDS + 1 do
    names[#names + 1] = at .. ':r' .. i
    names[#names + 1] = at .. ':w' .. i
  end
  if prefix ~= '' then
    names[#names + 1] = at .. ':c'
    names[#names + 1] = at .. ':f'
  end
  return names
end

-- Roll minute `prev` (under `prefix`) up into the coarser levels; drop the buckets of every
-- level that are out of its span once minute `m` begins.
local function roll_timings(prefix, prev, m)
  local names = timing_fields(prefix, 'm', prev)
  local counts = rcall('HMGET', TIMINGS, unpack(names))
  local cut = #prefix + #tostring(prev) + 2
  for li, lv in ipairs(TIMING_LEVELS) do
    local per = lv[2] / 60000
    local x = math.floor(prev / per)
    if li > 1 then
      for j, n in ipairs(counts) do
        if n then rcall('HINCRBY', TIMINGS, prefix .. lv[1] .. x .. string.sub(names[j], cut), n) end
      end
    end
    for gone = x - lv[3] + 1, math.min(x, math.floor(m / per) - lv[3]) do
      rcall('HDEL', TIMINGS, unpack(timing_fields(prefix, lv[1], gone)))
    end
  end
end

-- Add `per` (field suffix -> count) to the minute of `now` under `prefix`; true if that began
-- a minute (rolled the last one up).
local function add_timings(prefix, per, now)
  local m = math.floor(now / 60000)
  local at, fresh = prefix .. 'm' .. m .. ':', false
  for f, n in pairs(per) do
    if rcall('HINCRBY', TIMINGS, at .. f, n) == n then fresh = true end
  end
  if not fresh then return false end  -- a minute already begun: rolled up and trimmed then
  local prev = tonumber(rcall('HGET', TIMINGS, prefix .. '@m'))
  if prev and prev >= m then return false end
  if prev then roll_timings(prefix, prev, m) end
  rcall('HSET', TIMINGS, prefix .. '@m', m)
  return true
end

-- The bins of run times and wait times (seconds), as add_timings takes them. Counted by bin
-- number, named once per bin (not a number joined to a string per duration).
local function timing_bins(runs, waits)
  local per = {}
  for kind, list in pairs({r = runs, w = waits}) do
    local by = {}
    for _, d in ipairs(list) do
      local i = duration_bin(d)
      by[i] = (by[i] or 0) + 1
    end
    for i, n in pairs(by) do per[kind .. i] = n end
  end
  return per
end

-- Add run times and wait times (seconds) to the minute of `now`.
local function record_timings(runs, waits, now)
  if #runs == 0 and #waits == 0 then return end
  if add_timings('', timing_bins(runs, waits), now) then
    rcall('PEXPIRE', TIMINGS, @@timings_ttl_ms@@)
  end
end

-- The slot ('<k>.') of handler `name`: its own while fewer than HANDLERS_MAX have one, else
-- '0.' (other). One HGET for a handler already known; nil for none ('').
local function handler_slot(name)
  if not name or name == '' then return nil end
  local k = rcall('HGET', TIMINGS, '@n:' .. name)
  if k then return k .. '.' end
  if tonumber(rcall('HGET', TIMINGS, '@nc') or '0') >= HANDLERS_MAX then return '0.' end
  k = rcall('HINCRBY', TIMINGS, '@nc', 1)
  rcall('HSET', TIMINGS, '@n:' .. name, k, '@k' .. k, name)
  return k .. '.'
end

-- Add a handler's runs, waits, completed and failed attempts to the minute of `now`.
local function record_handler_timings(name, runs, waits, completed, failed, now)
  if #runs == 0 and #waits == 0 and completed == 0 and failed == 0 then return end
  local slot = handler_slot(name)
  if not slot then return end
  local per = timing_bins(runs, waits)
  if completed > 0 then per.c = completed end
  if failed > 0 then per.f = failed end
  if add_timings(slot, per, now) then rcall('PEXPIRE', TIMINGS, @@timings_ttl_ms@@) end
end
