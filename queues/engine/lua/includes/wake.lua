-- @include base
-- Wake-ups of idle workers, and due times of delayed tasks.

-- Tell up to n idle workers of this queue that work is there. A worker leaves the idle set
-- when woken and re-enters it (atomically, in start) only when it finds nothing to do.
local function wake(n)
  if n <= 0 then return end
  local ws = rcall('SPOP', K.idle, n)
  for _, w in ipairs(ws) do rcall('PUBLISH', CONTROL .. w, 'w ' .. QUEUE) end
end

-- The earliest due time of a delayed task, or -1.
local function next_due()
  local first = rcall('ZRANGE', K.delayed, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return -1
end

-- Tell every idle worker that the earliest due time changed (they sleep until it); the
-- message carries the time left in ms.
local function wake_for_due(due, now)
  local left = math.max(0, due - now)
  for _, w in ipairs(rcall('SMEMBERS', K.idle)) do
    rcall('PUBLISH', CONTROL .. w, 'd ' .. QUEUE .. ' ' .. left)
  end
end

-- Put a task in the delayed set, and wake sleepers if it is now the earliest.
local function delay_task(id, tk, due, now)
  local earliest = next_due()
  rcall('ZADD', K.delayed, due, id)
  rcall('HSET', tk, 's', 'delayed', 'due', due)
  if earliest < 0 or due < earliest then wake_for_due(due, now) end
end
