-- @include base
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

-- Run durations, as a histogram: bounds in seconds, as keys.py's DURATION_BOUNDS writes them.
local DURATION_BOUNDS = {@@duration_bounds@@}

-- Add the runs (a list of durations in seconds) to the queue's histogram in a few commands.
local function record_durations(runs)
  if #runs == 0 then return end
  local per, total = {}, 0
  for _, d in ipairs(runs) do
    local field = 'le:+Inf'
    for _, b in ipairs(DURATION_BOUNDS) do
      if d <= tonumber(b) then field = 'le:' .. b; break end
    end
    per[field] = (per[field] or 0) + 1
    total = total + d
  end
  for field, n in pairs(per) do rcall('HINCRBY', K.durations, field, n) end
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
local TIMINGS = PREFIX .. '@@timings@@'
local TIMING_LEVELS = {@@timing_levels@@}

local function timing_bin(d)
  for i, b in ipairs(DURATION_BOUNDS) do
    if d <= tonumber(b) then return i end
  end
  return #DURATION_BOUNDS + 1
end

-- The counters of bucket x of a level (tag): every bin of both kinds.
local function timing_fields(tag, x)
  local names = {}
  for i = 1, #DURATION_BOUNDS + 1 do
    names[#names + 1] = tag .. x .. ':r' .. i
    names[#names + 1] = tag .. x .. ':w' .. i
  end
  return names
end

-- Roll minute `prev` up into the coarser levels; drop the buckets of every level that are out
-- of its span once minute `m` begins.
local function roll_timings(prev, m)
  local names = timing_fields('m', prev)
  local counts = rcall('HMGET', TIMINGS, unpack(names))
  for li, lv in ipairs(TIMING_LEVELS) do
    local per = lv[2] / 60000
    local x = math.floor(prev / per)
    if li > 1 then
      for j, n in ipairs(counts) do
        if n then rcall('HINCRBY', TIMINGS, lv[1] .. x .. string.sub(names[j], #tostring(prev) + 2), n) end
      end
    end
    for gone = x - lv[3] + 1, math.min(x, math.floor(m / per) - lv[3]) do
      rcall('HDEL', TIMINGS, unpack(timing_fields(lv[1], gone)))
    end
  end
end

-- Add run times and wait times (seconds) to the minute of `now`.
local function record_timings(runs, waits, now)
  if #runs == 0 and #waits == 0 then return end
  local per = {}
  for _, d in ipairs(runs) do
    local f = 'r' .. timing_bin(d)
    per[f] = (per[f] or 0) + 1
  end
  for _, d in ipairs(waits) do
    local f = 'w' .. timing_bin(d)
    per[f] = (per[f] or 0) + 1
  end
  local m = math.floor(now / 60000)
  local prefix, fresh = 'm' .. m .. ':', false
  for f, n in pairs(per) do
    if rcall('HINCRBY', TIMINGS, prefix .. f, n) == n then fresh = true end
  end
  if not fresh then return end  -- a minute already begun: rolled up and trimmed then
  local prev = tonumber(rcall('HGET', TIMINGS, '@m'))
  if prev and prev >= m then return end
  if prev then roll_timings(prev, m) end
  rcall('HSET', TIMINGS, '@m', m)
  rcall('PEXPIRE', TIMINGS, @@timings_ttl_ms@@)
end
