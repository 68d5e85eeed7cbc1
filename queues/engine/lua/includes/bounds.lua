-- The bounds (seconds) of every duration histogram (run times, wait times, a schedule's
-- lateness): as the fields' text (keys.py's DURATION_BOUNDS, written '%g'), and as numbers, what
-- a duration is compared with (read once, when the script is compiled: no string read per
-- comparison).
local DURATION_BOUNDS = {@@duration_bounds@@}
local DURATION_LIMITS = {@@duration_limits@@}

-- The bin of duration d (seconds): the first bound it is within, #DURATION_BOUNDS + 1 past the
-- last. Remembered for the call (a call's durations, in whole ms, repeat).
local bins_seen = {}
local function duration_bin(d)
  if d ~= d then return #DURATION_LIMITS + 1 end  -- NaN: past every bound (and no table key)
  local i = bins_seen[d]
  if i then return i end
  i = #DURATION_LIMITS + 1
  for j, b in ipairs(DURATION_LIMITS) do
    if d <= b then
      i = j
      break
    end
  end
  bins_seen[d] = i
  return i
end

-- The histogram field of bin i: 'le:<bound>', or 'le:+Inf' past the last bound.
local function bin_field(i)
  return 'le:' .. (DURATION_BOUNDS[i] or '+Inf')
end
