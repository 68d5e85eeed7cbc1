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

-- The charts' run and wait times over time (durations.py: `timings`): per level (tag, bucket
-- ms, buckets kept) one histogram per bucket under the bounds above, fields
-- '<tag><bucket>:<r|w><bin>'; '@<tag>' notes the level's newest bucket. A new bucket drops the
-- buckets that left the level's span (one HDEL each; after a long gap at most `kept` of them).
-- Built from the prefix, as `ended` is: no script's keys change.
local TIMINGS = PREFIX .. '@@timings@@'
local TIMING_LEVELS = {@@timing_levels@@}

local function timing_bin(d)
  for i, b in ipairs(DURATION_BOUNDS) do
    if d <= tonumber(b) then return i end
  end
  return #DURATION_BOUNDS + 1
end

-- Add run times (seconds) and wait times (seconds) to the buckets of `now` at every level.
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
  local marks = rcall('HMGET', TIMINGS, '@m', '@q', '@h')
  for li, lv in ipairs(TIMING_LEVELS) do
    local tag, b = lv[1], math.floor(now / lv[2])
    local prev = tonumber(marks[li])
    if not prev or prev < b then
      if prev then
        local bins = #DURATION_BOUNDS + 1
        for x = prev - lv[3] + 1, math.min(prev, b - lv[3]) do
          local gone = {}
          for i = 1, bins do
            gone[#gone + 1] = tag .. x .. ':r' .. i
            gone[#gone + 1] = tag .. x .. ':w' .. i
          end
          rcall('HDEL', TIMINGS, unpack(gone))
        end
      end
      rcall('HSET', TIMINGS, '@' .. tag, b)
      if li == 1 then rcall('PEXPIRE', TIMINGS, @@timings_ttl_ms@@) end
    end
    local prefix = tag .. b .. ':'
    for f, n in pairs(per) do rcall('HINCRBY', TIMINGS, prefix .. f, n) end
  end
end
