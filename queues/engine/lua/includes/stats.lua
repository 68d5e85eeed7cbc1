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
